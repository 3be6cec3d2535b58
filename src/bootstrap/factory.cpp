// The public ways to make a bootstrap (shoal/bootstrap.hpp): from the launcher's environment, or from a
// unique id that PE 0 made and the caller distributed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "base/config.hpp"
#include "base/log.hpp"
#include "bootstrap/launch_env.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"

namespace shoal {
namespace {

constexpr char kIdMagic[8] = {'s', 'h', 'o', 'a', 'l', 'i', 'd', '1'};

// Listening sockets reserved by make_unique_id, by address, until this process's make_bootstrap takes
// them: holding the socket (rather than closing it and binding again later) means no other process can
// take the port in between.
std::mutex g_reserved_mutex;
std::map<std::string, detail::unique_fd> g_reserved;

std::string node_identity(const detail::config& cfg) { return cfg.node_id.empty() ? detail::host_name() : cfg.node_id; }

// An address of this host that other hosts can reach: the first non-loopback IPv4 address its name
// resolves to, else loopback (then only a single-host job works, which is all such a host can run).
std::string reachable_host() {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  std::string found = "127.0.0.1";
  if (::getaddrinfo(detail::host_name().c_str(), nullptr, &hints, &list) == 0) {
    for (addrinfo* a = list; a; a = a->ai_next) {
      auto* in = reinterpret_cast<sockaddr_in*>(a->ai_addr);
      if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
      char text[INET_ADDRSTRLEN];
      if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) {
        found = text;
        break;
      }
    }
    ::freeaddrinfo(list);
  }
  return found;
}

struct id_contents {
  std::string addr;
  std::string secret;
};

unique_id encode_id(const id_contents& c) {
  unique_id id;
  auto* out = id.bytes.data();
  std::memcpy(out, kIdMagic, sizeof kIdMagic);
  std::size_t pos = sizeof kIdMagic;
  for (const std::string* s : {&c.addr, &c.secret}) {
    if (s->size() > 56)
      throw error(errc::config, "make_unique_id",
                  fmt::format("the rendezvous address '{}' is longer than the 56 bytes an id carries "
                              "(set SHOAL_BOOTSTRAP_ADDR to a shorter host name or an IP address)",
                              *s));
    out[pos++] = static_cast<std::byte>(s->size());
    std::memcpy(out + pos, s->data(), s->size());
    pos += s->size();
  }
  return id;
}

id_contents decode_id(const unique_id& id) {
  const auto* in = id.bytes.data();
  auto bad = [] {
    return error(errc::invalid_argument, "make_bootstrap", "the unique_id was not made by make_unique_id");
  };
  if (std::memcmp(in, kIdMagic, sizeof kIdMagic) != 0) throw bad();
  std::size_t pos = sizeof kIdMagic;
  id_contents c;
  for (std::string* s : {&c.addr, &c.secret}) {
    if (pos >= id.bytes.size()) throw bad();
    auto n = static_cast<std::size_t>(in[pos++]);
    if (n == 0 || pos + n > id.bytes.size()) throw bad();
    s->assign(reinterpret_cast<const char*>(in + pos), n);
    pos += n;
  }
  return c;
}

// The launcher's socket stays open for the whole process: the hub serves a duplicate, so a second
// bootstrap after (or beside) the first can serve it again, and connections made while no hub runs wait
// in its backlog instead of being refused.
detail::unique_fd adopt_launcher_socket(int fd) {
  if (fd < 0) return {};
  detail::unique_fd dup(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!dup)
    throw error(errc::config, "SHOAL_BOOTSTRAP_LISTEN_FD",
                fmt::format("descriptor {} is not open in this process: {}", fd, std::strerror(errno)));
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // not for the application's own child processes
  return dup;
}

}  // namespace

unique_id make_unique_id() {
  const detail::config cfg = detail::config::load();
  detail::host_port where{reachable_host(), 0};
  if (!cfg.bootstrap_addr.empty()) where = detail::parse_host_port(cfg.bootstrap_addr, "SHOAL_BOOTSTRAP_ADDR");
  detail::unique_fd listener = detail::listen_tcp(where, 4096);
  where.port = detail::bound_port(listener.get());
  id_contents c{where.text(), detail::random_hex(16)};
  const unique_id id = encode_id(c);  // before the listener is kept: an id that cannot be made keeps nothing
  std::lock_guard lock(g_reserved_mutex);
  g_reserved[c.addr] = std::move(listener);
  return id;
}

std::unique_ptr<bootstrap> make_bootstrap(const unique_id& id, int pe, int n_pes) {
  const detail::config cfg = detail::config::load();
  id_contents c = decode_id(id);
  detail::tcp_bootstrap_options options{.pe = pe,
                                        .n_pes = n_pes,
                                        .addr = c.addr,
                                        .secret = c.secret,
                                        .timeout_s = cfg.bootstrap_timeout,
                                        .host = node_identity(cfg),
                                        .emulate_nodes = static_cast<int>(cfg.emulate_nodes)};
  {
    std::lock_guard lock(g_reserved_mutex);
    auto it = g_reserved.find(c.addr);
    if (it != g_reserved.end() && pe == 0) {
      options.listen_fd = std::move(it->second);
      g_reserved.erase(it);
    }
  }
  return std::make_unique<detail::tcp_bootstrap>(std::move(options));
}

std::unique_ptr<bootstrap> make_bootstrap_from_env() {
  const detail::config cfg = detail::config::load();
  detail::launch_info info = detail::detect_launch(cfg, [](const char* name) { return std::getenv(name); });
  if (info.launcher == "single process")
    SHOAL_LOG_INFO(bootstrap, "no launcher found in the environment: running as a job of 1 PE");
  if (info.weak_secret)
    SHOAL_LOG_INFO(bootstrap,
                   "{} launch without SHOAL_BOOTSTRAP_SECRET: using a secret derived from the job's "
                   "variables, which keeps jobs apart but does not keep out someone who can read them",
                   info.launcher);
  detail::tcp_bootstrap_options options{.pe = info.pe,
                                        .n_pes = info.n_pes,
                                        .addr = info.addr,
                                        .secret = info.secret.empty() ? detail::random_hex(16) : info.secret,
                                        .listen_fd = adopt_launcher_socket(info.listen_fd),
                                        .timeout_s = cfg.bootstrap_timeout,
                                        .host = node_identity(cfg),
                                        .emulate_nodes = static_cast<int>(cfg.emulate_nodes)};
  return std::make_unique<detail::tcp_bootstrap>(std::move(options));
}

}  // namespace shoal
