#include "bootstrap/tcp_bootstrap.hpp"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/log.hpp"
#include "bootstrap/node_map.hpp"

namespace shoal::detail {
namespace {

std::string seconds_text(double s) { return fmt::format("{:g} s", s); }

// "during all_gather #5" -> "all_gather #5", "during the rendezvous" -> "rendezvous": the failing call.
std::string_view context_of(std::string_view what) {
  what.remove_prefix(std::min(what.size(), what.find(' ') + 1));
  if (what.starts_with("the ")) what.remove_prefix(4);
  return what;
}

// Takes over a socket handed down by the launcher, checking that it is what it claims to be.
unique_fd adopt_listener(unique_fd fd) {
  int listening = 0;
  socklen_t len = sizeof listening;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
    throw error(errc::config, "SHOAL_BOOTSTRAP_LISTEN_FD",
                fmt::format("descriptor {} is not a listening socket ({})", fd.get(),
                            errno ? std::strerror(errno) : "not listening"));
  set_cloexec(fd.get());
  set_nonblocking(fd.get());
  return fd;
}

}  // namespace

tcp_bootstrap::tcp_bootstrap(tcp_bootstrap_options o) : pe_(o.pe), n_pes_(o.n_pes), timeout_s_(o.timeout_s) {
  if (n_pes_ < 1 || pe_ < 0 || pe_ >= n_pes_)
    throw error(errc::invalid_argument, "bootstrap", fmt::format("pe {} is not in 0..{}", pe_, n_pes_ - 1));
  // The hello carries the secret in a string field of at most kMaxStringBytes: a longer secret would
  // arrive cut, match no PE's and get every PE refused. Only SHOAL_BOOTSTRAP_SECRET can be that long.
  if (o.secret.size() > wire::kMaxStringBytes)
    throw error(errc::config, "SHOAL_BOOTSTRAP_SECRET",
                fmt::format("the secret is {} bytes long; at most {} bytes are allowed", o.secret.size(),
                            wire::kMaxStringBytes));
  host_port hub_at = parse_host_port(o.addr, "bootstrap address");
  // The hub answers within the timeout (or reports who is missing); this PE waits a little longer so
  // that the hub's message, which names the PE at fault, arrives before this PE gives up on its own.
  const deadline until = reply_deadline();
  fds_ = std::make_unique<fd_channel>(o.secret, pe_);
  std::string why;
  if (pe_ == 0) {
    unique_fd listener = o.listen_fd ? adopt_listener(std::move(o.listen_fd)) : listen_tcp(hub_at, 4096);
    if (hub_at.port == 0) hub_at.port = bound_port(listener.get());
    where_ = hub_at.text();
    // Connect before the hub runs: the connection waits in the backlog, so it cannot be refused because
    // the hub already failed (other PEs' faults) and closed its listener.
    conn_ = connect_tcp(hub_at, deadline::after(timeout_s_), why);
    hub_ = std::make_unique<hub>(hub_options{std::move(listener), where_, o.secret, n_pes_, timeout_s_});
  } else {
    where_ = hub_at.text();
  }
  try {
    if (!conn_) conn_ = connect_tcp(hub_at, deadline::after(timeout_s_), why);
    if (!conn_)
      fail(errc::timeout, "rendezvous",
           fmt::format("PE {} could not reach the rendezvous hub (PE 0) at {} within {}: {}", pe_, where_,
                       seconds_text(timeout_s_), why));
    std::vector<std::byte> hello = wire::encode_hello(
        {.secret = o.secret, .pe = pe_, .n_pes = n_pes_, .pid = ::getpid(), .host = o.host, .fd_socket = fds_->name()});
    wire::header_bytes head = wire::encode_header({wire::msg_type::hello, 0, hello.size()});
    io_status st = write_all(conn_.get(), head.data(), head.size(), until);
    if (st == io_status::ok) st = write_all(conn_.get(), hello.data(), hello.size(), until);
    if (st == io_status::timed_out || st == io_status::failed)
      fail(st == io_status::timed_out ? errc::timeout : errc::system, "rendezvous",
           fmt::format("PE {} could not send its hello to the rendezvous hub (PE 0) at {}: {}", pe_, where_,
                       st == io_status::failed ? std::strerror(errno) : "timed out"));

    // The hub welcomes a valid hello at once, and gives its verdict on the rendezvous (the table, or who
    // is missing) at most the timeout after it started, which was before the welcome. So the wait for the
    // verdict starts over from the welcome: a PE that started long before PE 0 then hears which PE is
    // missing, where counting from its own start it would give up first and blame PE 0.
    expect(wire::msg_type::welcome, 0, "during the rendezvous", until);
    const deadline verdict_by = reply_deadline();
    // Each entry is small: a bound far above any real table, below anything absurd.
    wire::header h = expect(wire::msg_type::table, 0, "during the rendezvous", verdict_by);
    if (h.size > static_cast<std::uint64_t>(n_pes_) * 3 * (wire::kMaxStringBytes + 16) + 4)
      fail(errc::bootstrap, "rendezvous", fmt::format("the hub sent a table of {} bytes for {} PEs", h.size, n_pes_));
    std::vector<std::byte> payload(h.size);
    read_payload(payload, "during the rendezvous", verdict_by);
    std::string why_bad;
    auto table = wire::decode_table(payload, &why_bad);
    if (!table || static_cast<int>(table->size()) != n_pes_)
      fail(errc::bootstrap, "rendezvous", fmt::format("the hub sent a bad table: {}", table ? "wrong size" : why_bad));
    table_ = std::move(*table);
  } catch (...) {
    if (hub_) hub_->abort();  // delivers a failure it already decided, then stops
    throw;
  }

  std::vector<std::string> hosts;
  for (const auto& entry : table_) hosts.push_back(entry.host);
  placement_ = place_pe(hosts, o.emulate_nodes, pe_);
}

tcp_bootstrap::~tcp_bootstrap() {
  if (conn_ && !broken_) {
    // The goodbye tells the hub that this PE's connection closing is not a death. Best effort: if it
    // cannot be sent the hub reports this PE as gone, which by now is true.
    wire::header_bytes head = wire::encode_header({wire::msg_type::bye, seq_, 0});
    write_all(conn_.get(), head.data(), head.size(), deadline::after(std::min(timeout_s_, 1.0)));
  }
  conn_.reset();
  if (hub_) {
    if (broken_) hub_->abort();
    hub_.reset();  // waits for the other PEs' goodbyes, at most the timeout
  }
}

deadline tcp_bootstrap::reply_deadline() const { return deadline::after(timeout_s_ * 1.25 + 0.5); }

void tcp_bootstrap::fail(errc category, std::string_view context, std::string detail) {
  if (hub_) {
    // In PE 0 the hub's own verdict, when there is one, is the cause of whatever this PE saw.
    if (std::optional<wire::failure> verdict = hub_->failure()) {
      category = verdict->category;
      detail = std::move(verdict->message);
    }
  }
  broken_.emplace(category, fmt::format("bootstrap {}", context), detail);
  throw *broken_;
}

wire::header tcp_bootstrap::expect(wire::msg_type type, std::uint64_t seq, std::string_view what, deadline until) {
  std::string_view context = context_of(what);
  wire::header_bytes bytes{};
  io_status st = read_all(conn_.get(), bytes.data(), bytes.size(), until);
  if (st == io_status::closed)
    fail(errc::peer_failure, context,
         pe_ == 0 ? fmt::format("the rendezvous hub (in this PE 0) stopped {}", what)
                  : fmt::format("lost the connection to the rendezvous hub in PE 0 ({}) {}: PE 0 died or closed it",
                                where_, what));
  if (st == io_status::timed_out)
    fail(errc::timeout, context,
         fmt::format("no answer from the rendezvous hub (PE 0 at {}) {} within {} (is PE 0 running?)", where_, what,
                     seconds_text(timeout_s_)));
  if (st == io_status::failed)
    fail(errc::system, context, fmt::format("reading from the rendezvous hub: {}", std::strerror(errno)));
  std::string why;
  std::optional<wire::header> h = wire::decode_header(bytes, &why);
  if (!h) fail(errc::bootstrap, context, fmt::format("corrupt message from the rendezvous hub: {}", why));
  if (h->type == wire::msg_type::failure) {
    std::vector<std::byte> payload(std::min<std::uint64_t>(h->size, wire::kMaxStringBytes + 8));
    if (h->size != payload.size()) fail(errc::bootstrap, context, "the hub reported a failure it could not describe");
    read_payload(payload, what, until);
    std::optional<wire::failure> f = wire::decode_failure(payload, &why);
    if (!f) fail(errc::bootstrap, context, fmt::format("the hub reported a failure: {}", why));
    fail(f->category, context, std::move(f->message));
  }
  if (h->type != type || h->seq != seq)
    fail(errc::internal, context,
         fmt::format("unexpected message from the rendezvous hub (type {}, #{})", static_cast<int>(h->type), h->seq));
  return *h;
}

void tcp_bootstrap::read_payload(std::span<std::byte> out, std::string_view what, deadline until) {
  std::string_view context = context_of(what);
  io_status st = read_all(conn_.get(), out.data(), out.size(), until);
  if (st == io_status::closed)
    fail(
        errc::peer_failure, context,
        fmt::format("lost the connection to the rendezvous hub in PE 0 ({}) {}: PE 0 died or closed it", where_, what));
  if (st == io_status::timed_out)
    fail(errc::timeout, context,
         fmt::format("the rendezvous hub (PE 0 at {}) stalled {} for {}", where_, what, seconds_text(timeout_s_)));
  if (st == io_status::failed)
    fail(errc::system, context, fmt::format("reading from the rendezvous hub: {}", std::strerror(errno)));
}

void tcp_bootstrap::collective(const wire::coll_header& coll, std::span<const std::byte> data,
                               std::span<std::byte> out) {
  std::lock_guard lock(mutex_);
  if (broken_) throw *broken_;
  const std::uint64_t seq = ++seq_;
  const std::string what = fmt::format("during {} #{}", wire::to_string(coll.kind), seq);
  const deadline until = reply_deadline();

  wire::header_bytes head = wire::encode_header({wire::msg_type::coll, seq, wire::kCollHeaderBytes + data.size()});
  auto coll_bytes = wire::encode_coll_header(coll);
  io_status st = write_all(conn_.get(), head.data(), head.size(), until);
  if (st == io_status::ok) st = write_all(conn_.get(), coll_bytes.data(), coll_bytes.size(), until);
  if (st == io_status::ok) st = write_all(conn_.get(), data.data(), data.size(), until);
  if (st == io_status::timed_out)
    fail(errc::timeout, what.substr(7),
         fmt::format("the rendezvous hub (PE 0 at {}) took no data {} for {}", where_, what, seconds_text(timeout_s_)));
  if (st == io_status::failed)
    fail(errc::system, what.substr(7), fmt::format("writing to the rendezvous hub: {}", std::strerror(errno)));
  // On `closed` the hub may have left a failure message saying why: expect() reads it or reports the loss.

  wire::header h = expect(wire::msg_type::result, seq, what, until);
  if (h.size != out.size())
    fail(errc::internal, what.substr(7), fmt::format("the hub answered with {} bytes, not {}", h.size, out.size()));
  read_payload(out, what, until);
}

void tcp_bootstrap::all_gather(const void* mine, void* all, std::size_t bytes) {
  if (bytes > wire::kMaxPayloadBytes / static_cast<std::size_t>(n_pes_))
    throw error(errc::invalid_argument, "bootstrap all_gather", fmt::format("{} bytes per PE is too large", bytes));
  collective({wire::coll_kind::all_gather, 0, bytes}, {static_cast<const std::byte*>(mine), bytes},
             {static_cast<std::byte*>(all), bytes * static_cast<std::size_t>(n_pes_)});
}

void tcp_bootstrap::broadcast(void* data, std::size_t bytes, int root) {
  if (root < 0 || root >= n_pes_)
    throw error(errc::invalid_argument, "bootstrap broadcast",
                fmt::format("root {} is not a PE of 0..{}", root, n_pes_ - 1));
  if (bytes > wire::kMaxPayloadBytes)
    throw error(errc::invalid_argument, "bootstrap broadcast", fmt::format("{} bytes is too large", bytes));
  auto* p = static_cast<std::byte*>(data);
  collective({wire::coll_kind::broadcast, root, bytes}, {p, pe_ == root ? bytes : 0}, {p, bytes});
}

void tcp_bootstrap::barrier() { collective({wire::coll_kind::barrier, 0, 0}, {}, {}); }

void tcp_bootstrap::alltoall(const void* send, void* recv, std::size_t bytes) {
  if (bytes > wire::kMaxPayloadBytes / static_cast<std::size_t>(n_pes_))
    throw error(errc::invalid_argument, "bootstrap alltoall", fmt::format("{} bytes per block is too large", bytes));
  std::size_t total = bytes * static_cast<std::size_t>(n_pes_);
  collective({wire::coll_kind::alltoall, 0, bytes}, {static_cast<const std::byte*>(send), total},
             {static_cast<std::byte*>(recv), total});
}

void tcp_bootstrap::send_fds(int local_peer, std::span<const int> fds) {
  int to = world_pe_of(local_peer, "bootstrap send_fds");
  std::lock_guard lock(fd_mutex_);
  fds_->send(to, table_[static_cast<std::size_t>(to)].fd_socket, fds, deadline::after(timeout_s_));
}

std::vector<int> tcp_bootstrap::recv_fds(int local_peer, std::size_t count) {
  int from = world_pe_of(local_peer, "bootstrap recv_fds");
  std::lock_guard lock(fd_mutex_);
  return fds_->recv(from, count, deadline::after(timeout_s_));
}

}  // namespace shoal::detail
