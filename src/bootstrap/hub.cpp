#include "bootstrap/hub.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <vector>

#include "base/log.hpp"
#include "bootstrap/wire.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

constexpr int kFinish = 1;
constexpr int kAbort = 2;
// Reads of a large payload proceed in steps of this, so a lying length field cannot make the hub
// allocate more than what actually arrived.
constexpr std::size_t kReadStep = std::size_t{1} << 20;

using buffer = std::shared_ptr<const std::vector<std::byte>>;

struct out_chunk {
  buffer data;
  std::size_t offset = 0;
};

struct connection {
  unique_fd fd;
  std::string peer;  // remote address, for warnings
  int pe = -1;       // set once its hello checked out
  bool said_bye = false;
  bool closing = false;  // after a failure: shut down writing once `out` drained, then await the PE's close
  bool shut = false;
  deadline hello_by = deadline::after(0);
  wire::header_bytes head{};
  std::size_t head_got = 0;
  std::optional<wire::header> hdr;
  std::vector<std::byte> payload;
  std::deque<out_chunk> out;
};

struct contribution {
  wire::coll_header coll;
  std::vector<std::byte> data;
};

std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
    port = ntohs(in->sin6_port);
  }
  return fmt::format("{}:{}", host, port);
}

// Compares without an early exit, so the time taken does not tell how much of a guess was right.
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// "PE 3", "PEs 1 and 4", "PEs 1, 4 and 6", "PEs 1, 2, ... (40 in all)".
std::string list_pes(const std::vector<int>& pes) {
  if (pes.size() == 1) return fmt::format("PE {}", pes[0]);
  constexpr std::size_t kShown = 16;
  std::string out = "PEs ";
  std::size_t shown = std::min(pes.size(), kShown);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) out += i + 1 == pes.size() ? " and " : ", ";
    out += std::to_string(pes[i]);
  }
  if (shown < pes.size()) out += fmt::format(", ... ({} in all)", pes.size());
  return out;
}

std::string format_seconds(double s) { return fmt::format("{:g} s", s); }

}  // namespace

struct hub::loop {
  loop(hub_options o, hub::verdict& v)
      : shared(v),
        listener(std::move(o.listener)),
        where(std::move(o.where)),
        secret(std::move(o.secret)),
        n_pes(o.n_pes),
        timeout_s(o.timeout_s),
        members(static_cast<std::size_t>(n_pes), nullptr),
        arrived(static_cast<std::size_t>(n_pes), false),
        hosts(static_cast<std::size_t>(n_pes)),
        pids(static_cast<std::size_t>(n_pes), 0),
        contributions(static_cast<std::size_t>(n_pes)) {}

  void run(int wake_fd, const std::atomic<int>& command) noexcept;

  // --- events
  void accept_all();
  void on_readable(connection& c);
  void on_writable(connection& c);
  void on_closed(connection& c, bool partial);
  void on_message(connection& c);
  void on_hello(connection& c);
  void on_coll(connection& c);
  void on_bye(connection& c);
  void check_deadlines();
  void complete_round();

  // --- helpers
  void send(connection& c, wire::msg_type type, std::uint64_t seq, buffer payload);
  void drop(connection& c, std::string_view why);
  // The job cannot go on: tell every PE (and `also`, a connection that caused it), then wind down.
  void fail(errc category, std::string message, connection* also = nullptr);
  void tell_failure(connection& c);  // after fail(): send it the failure, then close once delivered
  std::string phase() const;
  bool done() const;
  deadline next_deadline() const;

  hub::verdict& shared;  // where the failure is published for PE 0
  unique_fd listener;
  std::string where;
  std::string secret;
  int n_pes;
  double timeout_s;

  std::vector<std::unique_ptr<connection>> conns;
  std::vector<connection*> members;  // by pe, while connected
  std::vector<bool> arrived;         // by pe: its hello checked out (stays true after it leaves)
  std::vector<std::string> hosts;
  std::vector<std::int64_t> pids;
  std::vector<wire::peer_info> table_entries;  // filled as hellos arrive, sent once all did
  int n_arrived = 0;
  int n_bye = 0;
  bool rendezvous_done = false;
  deadline rendezvous_by = deadline::after(timeout_s);

  // The collective in progress: number round_seq, parts received so far.
  std::uint64_t round_seq = 1;
  std::vector<std::optional<contribution>> contributions;
  int n_contributed = 0;
  int round_first_pe = -1;
  deadline round_by = deadline::after(0);

  bool failed = false;
  std::optional<deadline> flush_by;   // after a failure: how long delivering it may take
  buffer failure_message;             // after a failure: what every PE is told
  std::optional<deadline> finish_by;  // after PE 0 finalized: how long the others may take to say goodbye
  bool aborting = false;
  bool stop_now = false;
};

void hub::loop::run(int wake_fd, const std::atomic<int>& command) noexcept {
  try {
    std::vector<pollfd> fds;
    while (!done()) {
      fds.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      fds.push_back({listener ? listener.get() : -1, POLLIN, 0});
      for (auto& c : conns) {
        short events = POLLIN;
        if (!c->out.empty()) events |= POLLOUT;
        fds.push_back({c->fd.get(), events, 0});
      }
      int rc = ::poll(fds.data(), fds.size(), next_deadline().poll_ms());
      if (rc < 0 && errno != EINTR)
        throw error(errc::system, "bootstrap hub", fmt::format("poll: {}", std::strerror(errno)));
      if (rc > 0) {
        if (fds[0].revents) {
          std::uint64_t ignored;
          ssize_t n = ::read(wake_fd, &ignored, sizeof ignored);
          (void)n;
        }
        // conns may grow during this pass (accept); only the ones polled are looked at.
        std::size_t polled = fds.size() - 2;
        for (std::size_t i = 0; i < polled; ++i) {
          connection& c = *conns[i];
          short ev = fds[i + 2].revents;
          if (c.fd && (ev & POLLOUT)) on_writable(c);
          if (c.fd && (ev & (POLLIN | POLLHUP | POLLERR))) on_readable(c);
        }
        if (fds[1].revents && listener) accept_all();
      }
      int cmd = command.load(std::memory_order_acquire);
      if (cmd == kAbort && !aborting) {
        aborting = true;
        if (!failed) stop_now = true;  // nothing to deliver: go now
      } else if (cmd == kFinish && !finish_by) {
        finish_by = deadline::after(timeout_s);
      }
      check_deadlines();
      for (auto& c : conns) {
        // A graceful close after a failure: closing with unread input would reset the connection, which
        // can destroy the failure message before the PE read it. The PE closes once it read it.
        if (c->fd && c->closing && c->out.empty() && !c->shut) {
          ::shutdown(c->fd.get(), SHUT_WR);
          c->shut = true;
        }
      }
      for (std::size_t pe = 0; pe < members.size(); ++pe)
        if (members[pe] && !members[pe]->fd) members[pe] = nullptr;
      std::erase_if(conns, [](const auto& c) { return !c->fd; });
    }
  } catch (const std::exception& e) {
    SHOAL_LOG_ERROR(bootstrap, "rendezvous hub failed: {}", e.what());
  }
  // Leaving closes every connection: PEs still waiting see the hub (PE 0) gone, never a hang.
}

bool hub::loop::done() const {
  if (stop_now) return true;
  if (failed) return conns.empty() || (flush_by && flush_by->expired());
  if (rendezvous_done && n_bye == n_pes) return true;
  return false;
}

deadline hub::loop::next_deadline() const {
  deadline next = deadline::after(3600);
  if (!rendezvous_done && !failed) next = next.earliest(rendezvous_by);
  if (n_contributed > 0 && !failed) next = next.earliest(round_by);
  if (flush_by) next = next.earliest(*flush_by);
  if (finish_by) next = next.earliest(*finish_by);
  for (const auto& c : conns)
    if (c->pe < 0 && c->fd) next = next.earliest(c->hello_by);
  return next;
}

void hub::loop::accept_all() {
  for (;;) {
    int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors, the listener stays readable and the hub would spin until the deadline: the job
      // cannot form, so say why now.
      if (errno == EMFILE || errno == ENFILE) {
        fail(errc::system,
             fmt::format("the rendezvous hub in PE 0 cannot accept PE connections ({}): it needs one descriptor "
                         "per PE; raise the limit of open files (ulimit -n)",
                         std::strerror(errno)));
        listener.reset();  // it would stay readable while the failure is delivered
      }
      return;
    }
    int one = 1;  // headers and payloads go out as separate sends: Nagle would hold the second one back
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<connection>();
    c->fd.reset(fd);
    c->peer = peer_address(fd);
    c->hello_by = deadline::after(timeout_s);
    conns.push_back(std::move(c));
  }
}

void hub::loop::drop(connection& c, std::string_view why) {
  SHOAL_LOG_WARN(bootstrap, "rendezvous hub at {}: dropped a connection from {}: {}", where, c.peer, why);
  c.fd.reset();
}

void hub::loop::on_readable(connection& c) {
  for (;;) {
    if (!c.hdr) {
      ssize_t n = ::recv(c.fd.get(), c.head.data() + c.head_got, c.head.size() - c.head_got, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) return on_closed(c, c.head_got > 0);
      c.head_got += static_cast<std::size_t>(n);
      if (c.head_got < c.head.size()) continue;
      std::string why;
      std::optional<wire::header> h = wire::decode_header(c.head, &why);
      if (!h) {
        if (c.pe < 0) return drop(c, why);
        return fail(errc::bootstrap, fmt::format("PE {} sent a corrupt message: {}", c.pe, why));
      }
      if (c.pe < 0 && (h->type != wire::msg_type::hello || h->size > wire::kMaxHelloBytes))
        return drop(c, h->type != wire::msg_type::hello ? "the first message is not a hello"
                                                        : fmt::format("a hello of {} bytes", h->size));
      if (h->size > wire::kMaxPayloadBytes)
        return fail(errc::bootstrap, fmt::format("PE {} sent a message of {} bytes", c.pe, h->size));
      c.hdr = h;
      c.payload.clear();
    }
    std::size_t want = static_cast<std::size_t>(c.hdr->size) - c.payload.size();
    if (want > 0) {
      std::size_t have = c.payload.size();
      c.payload.resize(have + std::min(want, kReadStep));
      ssize_t n = ::recv(c.fd.get(), c.payload.data() + have, c.payload.size() - have, MSG_DONTWAIT);
      c.payload.resize(have + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) return on_closed(c, true);
      if (c.payload.size() < c.hdr->size) continue;
    }
    on_message(c);
    c.hdr.reset();
    c.head_got = 0;
    c.payload = {};
    if (!c.fd) return;
  }
}

void hub::loop::on_writable(connection& c) {
  while (!c.out.empty()) {
    out_chunk& chunk = c.out.front();
    const std::vector<std::byte>& data = *chunk.data;
    if (chunk.offset == data.size()) {
      c.out.pop_front();
      continue;
    }
    ssize_t n = ::send(c.fd.get(), data.data() + chunk.offset, data.size() - chunk.offset, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) {
      c.out.clear();
      return on_closed(c, false);
    }
    chunk.offset += static_cast<std::size_t>(n);
  }
}

void hub::loop::send(connection& c, wire::msg_type type, std::uint64_t seq, buffer payload) {
  wire::header_bytes head = wire::encode_header({type, seq, payload ? payload->size() : 0});
  c.out.push_back({std::make_shared<std::vector<std::byte>>(head.begin(), head.end()), 0});
  if (payload && !payload->empty()) c.out.push_back({std::move(payload), 0});
  on_writable(c);  // most results fit the socket buffer: send now rather than after the next poll
}

std::string hub::loop::phase() const {
  if (!rendezvous_done) return "before the rendezvous completed";
  if (n_contributed > 0) {
    const contribution& any = *contributions[static_cast<std::size_t>(round_first_pe)];
    return fmt::format("during {} #{}", wire::to_string(any.coll.kind), round_seq);
  }
  if (round_seq == 1) return "before its first collective";
  return fmt::format("after collective #{}", round_seq - 1);
}

void hub::loop::on_closed(connection& c, bool partial) {
  if (c.closing) {
    c.fd.reset();
    return;
  }
  if (c.pe < 0) {
    if (partial) return drop(c, "truncated hello (the connection closed mid-message)");
    return drop(c, "closed without sending a hello");
  }
  int pe = c.pe;
  c.fd.reset();
  if (c.said_bye || failed) return;
  fail(errc::peer_failure, fmt::format("PE {} died (connection closed) {}", pe, phase()));
}

void hub::loop::on_message(connection& c) {
  if (c.pe < 0) return on_hello(c);
  if (failed) return;  // only delivering the failure now
  switch (c.hdr->type) {
    case wire::msg_type::coll:
      return on_coll(c);
    case wire::msg_type::bye:
      return on_bye(c);
    default:
      fail(errc::bootstrap,
           fmt::format("PE {} sent an unexpected message (type {})", c.pe, static_cast<int>(c.hdr->type)));
  }
}

void hub::loop::on_hello(connection& c) {
  std::string why;
  std::optional<wire::hello> h = wire::decode_hello(c.payload, &why);
  if (!h) return drop(c, fmt::format("malformed hello: {}", why));
  if (!same_secret(h->secret, secret)) return drop(c, "wrong secret (a process of another job, or not shoal?)");
  if (failed) return tell_failure(c);
  std::string who = fmt::format("PE {} (pid {} on {})", h->pe, h->pid, h->host);
  if (h->n_pes != n_pes)
    return fail(
        errc::bootstrap,
        fmt::format("PEs disagree about the job size: {} was started for {} PEs, PE 0 for {}", who, h->n_pes, n_pes),
        &c);
  if (h->pe < 0 || h->pe >= n_pes)
    return fail(errc::bootstrap, fmt::format("{} is out of range for a job of {} PEs", who, n_pes), &c);
  auto pe = static_cast<std::size_t>(h->pe);
  if (arrived[pe])
    return fail(errc::bootstrap,
                fmt::format("two processes claim PE {}: pid {} on {} and pid {} on {}", h->pe, pids[pe], hosts[pe],
                            h->pid, h->host),
                &c);
  c.pe = h->pe;
  send(c, wire::msg_type::welcome, 0, nullptr);  // the PE's wait for the table starts over (tcp_bootstrap)
  members[pe] = &c;
  arrived[pe] = true;
  hosts[pe] = h->host;
  pids[pe] = h->pid;
  std::vector<wire::peer_info>& table = table_entries;
  table.resize(static_cast<std::size_t>(n_pes));
  table[pe] = {h->host, h->pid, h->fd_socket};
  if (++n_arrived < n_pes) return;
  rendezvous_done = true;
  // Nobody else may join now: stop accepting, and drop connections that never became a PE. Closing the
  // listener also lets a later bootstrap of this process serve the same launcher socket (see factory.cpp).
  listener.reset();
  for (auto& other : conns)
    if (other->fd && other->pe < 0) drop(*other, "the rendezvous completed without it");
  auto payload = std::make_shared<const std::vector<std::byte>>(wire::encode_table(table));
  for (connection* m : members)
    if (m) send(*m, wire::msg_type::table, 0, payload);
  table.clear();
}

void hub::loop::on_coll(connection& c) {
  std::string why;
  std::optional<wire::coll_header> h = wire::decode_coll_header(c.payload, &why);
  if (!h) return fail(errc::bootstrap, fmt::format("PE {} sent a corrupt collective: {}", c.pe, why));
  std::optional<std::uint64_t> data_bytes = wire::coll_data_bytes(*h, c.pe, n_pes);
  if (!rendezvous_done || !data_bytes || c.payload.size() != wire::kCollHeaderBytes + *data_bytes ||
      (h->kind == wire::coll_kind::broadcast && (h->root < 0 || h->root >= n_pes)))
    return fail(errc::bootstrap, fmt::format("PE {} sent a malformed {}", c.pe, wire::describe(*h)));
  if (c.hdr->seq != round_seq)
    return fail(errc::bootstrap, fmt::format("PE {} called {} as collective #{} while the others are at #{}", c.pe,
                                             wire::describe(*h), c.hdr->seq, round_seq));
  for (std::size_t pe = 0; pe < members.size(); ++pe) {
    if (arrived[pe] && !members[pe])  // left with a goodbye (a death would have failed the job already)
      return fail(errc::bootstrap, fmt::format("PE {} called {} as collective #{}, but PE {} already finalized", c.pe,
                                               wire::describe(*h), round_seq, pe));
  }
  if (n_contributed > 0) {
    const wire::coll_header& first = contributions[static_cast<std::size_t>(round_first_pe)]->coll;
    if (!(first == *h))
      return fail(errc::bootstrap, fmt::format("PEs called different collectives as #{}: PE {} {}, PE {} {}", round_seq,
                                               round_first_pe, wire::describe(first), c.pe, wire::describe(*h)));
  } else {
    round_first_pe = c.pe;
    round_by = deadline::after(timeout_s);
  }
  auto& slot = contributions[static_cast<std::size_t>(c.pe)];
  if (slot) return fail(errc::internal, fmt::format("PE {} entered collective #{} twice", c.pe, round_seq));
  c.payload.erase(c.payload.begin(), c.payload.begin() + wire::kCollHeaderBytes);
  slot = contribution{*h, std::move(c.payload)};
  if (++n_contributed == n_pes) complete_round();
}

void hub::loop::complete_round() {
  const wire::coll_header coll = contributions[0]->coll;
  const std::size_t bytes = static_cast<std::size_t>(coll.bytes);
  const auto n = static_cast<std::size_t>(n_pes);
  auto send_all = [&](buffer payload) {
    for (connection* m : members)
      if (m) send(*m, wire::msg_type::result, round_seq, payload);
  };
  switch (coll.kind) {
    case wire::coll_kind::all_gather: {
      auto all = std::make_shared<std::vector<std::byte>>();
      all->reserve(n * bytes);
      for (auto& part : contributions) all->insert(all->end(), part->data.begin(), part->data.end());
      send_all(std::move(all));
      break;
    }
    case wire::coll_kind::broadcast:
      send_all(std::make_shared<std::vector<std::byte>>(
          std::move(contributions[static_cast<std::size_t>(coll.root)]->data)));
      break;
    case wire::coll_kind::barrier:
      send_all(nullptr);
      break;
    case wire::coll_kind::alltoall:
      for (std::size_t q = 0; q < n; ++q) {
        auto mine = std::make_shared<std::vector<std::byte>>();
        mine->reserve(n * bytes);
        for (auto& part : contributions) {
          auto block = part->data.begin() + static_cast<std::ptrdiff_t>(q * bytes);
          mine->insert(mine->end(), block, block + static_cast<std::ptrdiff_t>(bytes));
        }
        if (members[q]) send(*members[q], wire::msg_type::result, round_seq, std::move(mine));
      }
      break;
  }
  for (auto& part : contributions) part.reset();
  n_contributed = 0;
  round_first_pe = -1;
  ++round_seq;
}

void hub::loop::on_bye(connection& c) {
  c.said_bye = true;
  ++n_bye;
  int pe = c.pe;
  members[static_cast<std::size_t>(pe)] = nullptr;
  c.fd.reset();  // nothing more is owed to a PE that finalized
  if (n_contributed > 0) {
    std::vector<int> waiting;
    for (int p = 0; p < n_pes; ++p)
      if (contributions[static_cast<std::size_t>(p)]) waiting.push_back(p);
    fail(errc::bootstrap,
         fmt::format("PE {} finalized after {} collectives while {} wait in {} #{}", pe, c.hdr->seq, list_pes(waiting),
                     wire::to_string(contributions[static_cast<std::size_t>(waiting[0])]->coll.kind), round_seq));
  }
}

void hub::loop::check_deadlines() {
  for (auto& c : conns)
    if (c->fd && c->pe < 0 && c->hello_by.expired())
      drop(*c, fmt::format("no hello within {}", format_seconds(timeout_s)));
  if (failed) return;
  if (!rendezvous_done && rendezvous_by.expired()) {
    std::vector<int> missing;
    for (int pe = 0; pe < n_pes; ++pe)
      if (!arrived[static_cast<std::size_t>(pe)]) missing.push_back(pe);
    return fail(errc::timeout, fmt::format("{} never reached the rendezvous at {} within {}", list_pes(missing), where,
                                           format_seconds(timeout_s)));
  }
  if (n_contributed > 0 && round_by.expired()) {
    std::vector<int> missing;
    for (int pe = 0; pe < n_pes; ++pe)
      if (!contributions[static_cast<std::size_t>(pe)]) missing.push_back(pe);
    const auto& kind = contributions[static_cast<std::size_t>(round_first_pe)]->coll.kind;
    return fail(errc::timeout,
                fmt::format("{} did not enter {} #{} within {} of PE {}", list_pes(missing), wire::to_string(kind),
                            round_seq, format_seconds(timeout_s), round_first_pe));
  }
  if (finish_by && finish_by->expired()) {
    std::vector<int> missing;
    for (int pe = 0; pe < n_pes; ++pe)
      if (members[static_cast<std::size_t>(pe)]) missing.push_back(pe);
    SHOAL_LOG_WARN(bootstrap, "rendezvous hub: {} had not finalized {} after PE 0 did; closing", list_pes(missing),
                   format_seconds(timeout_s));
    stop_now = true;
  }
}

void hub::loop::fail(errc category, std::string message, connection* also) {
  if (failed) return;
  failed = true;
  SHOAL_LOG_DEBUG(bootstrap, "rendezvous hub: job failed: {}", message);
  {
    std::lock_guard lock(shared.mutex);
    shared.failure = wire::failure{category, message};
  }
  failure_message =
      std::make_shared<const std::vector<std::byte>>(wire::encode_failure({category, std::move(message)}));
  // A connection that has not said hello yet stays open: once its hello shows it is a PE of this job it is
  // told the failure too (on_hello), rather than seeing PE 0 close on it. The listener stays open for the
  // same reason, so a PE that comes late in the delivery window hears why instead of finding no hub.
  for (auto& c : conns)
    if (c->fd && (c->pe >= 0 || c.get() == also)) tell_failure(*c);
  // Delivering is bounded too: a PE that does not read (or is stuck writing a large part) is left behind.
  flush_by = deadline::after(std::min(timeout_s, 5.0));
}

void hub::loop::tell_failure(connection& c) {
  c.closing = true;
  send(c, wire::msg_type::failure, 0, failure_message);
}

hub::hub(hub_options options) : loop_(std::make_unique<loop>(std::move(options), verdict_)) {
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throw error(errc::system, "bootstrap hub", fmt::format("eventfd: {}", std::strerror(errno)));
  thread_ = std::thread([this] { loop_->run(wake_.get(), command_); });
}

hub::~hub() {
  finish();
  if (thread_.joinable()) thread_.join();
}

void hub::command(int what) noexcept {
  int expected = 0;
  if (what == kAbort) {
    command_.store(kAbort, std::memory_order_release);
  } else if (!command_.compare_exchange_strong(expected, what, std::memory_order_acq_rel)) {
    return;
  }
  std::uint64_t one = 1;
  ssize_t n = ::write(wake_.get(), &one, sizeof one);
  (void)n;
}

void hub::finish() noexcept { command(kFinish); }

std::optional<wire::failure> hub::failure() const {
  std::lock_guard lock(verdict_.mutex);
  return verdict_.failure;
}
void hub::abort() noexcept { command(kAbort); }

}  // namespace shoal::detail
