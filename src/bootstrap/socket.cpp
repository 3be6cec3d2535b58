#include "bootstrap/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <thread>
#include <utility>

#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

[[noreturn]] void throw_errno(std::string_view context, std::string_view what, int err) {
  throw error(errc::system, context, fmt::format("{}: {}", what, std::strerror(err)));
}

// getaddrinfo for `where`; `passive` for bind(). The caller frees the list.
addrinfo* resolve(const host_port& where, bool passive, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  std::string port = std::to_string(where.port);
  int rc = ::getaddrinfo(where.host.empty() ? nullptr : where.host.c_str(), port.c_str(), &hints, &list);
  if (rc != 0) {
    why = fmt::format("cannot resolve '{}': {}", where.host, ::gai_strerror(rc));
    return nullptr;
  }
  return list;
}

// A connect that failed with one of these may succeed later: nobody listens yet, or the backlog is full.
bool worth_retrying(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNRESET ||
         err == EAGAIN || err == EINPROGRESS;
}

}  // namespace

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int unique_fd::release() noexcept { return std::exchange(fd_, -1); }

void unique_fd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);  // close() is not retried on EINTR: on Linux the descriptor is gone either way
  fd_ = fd;
}

deadline deadline::after(double seconds) {
  auto span = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(std::max(seconds, 0.0)));
  return deadline(clock::now() + span);
}

int deadline::poll_ms() const {
  auto left = when_ - clock::now();
  if (left <= clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, INT_MAX));
}

const char* to_string(io_status status) noexcept {
  switch (status) {
    case io_status::ok:
      return "ok";
    case io_status::closed:
      return "connection closed";
    case io_status::timed_out:
      return "timed out";
    case io_status::failed:
      return "failed";
  }
  return "?";
}

bool wait_for(int fd, short events, deadline until) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, until.poll_ms());
    if (rc > 0) return true;  // ready, or an error/hang-up that the next read or write reports
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the caller's read/write see the error
  }
}

io_status write_all(int fd, const void* data, std::size_t bytes, deadline until) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd, POLLOUT, until)) return io_status::timed_out;
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return io_status::closed;
    return io_status::failed;
  }
  return io_status::ok;
}

io_status read_all(int fd, void* data, std::size_t bytes, deadline until) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return io_status::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLIN, until)) return io_status::timed_out;
      continue;
    }
    if (errno == ECONNRESET) return io_status::closed;
    return io_status::failed;
  }
  return io_status::ok;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw_errno("bootstrap", "fcntl(O_NONBLOCK)", errno);
}

void set_cloexec(int fd) {
  int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) throw_errno("bootstrap", "fcntl(FD_CLOEXEC)", errno);
}

std::string host_port::text() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

host_port parse_host_port(std::string_view text, std::string_view what) {
  auto bad = [&](std::string_view why) -> error {
    return error(errc::invalid_argument, what, fmt::format("'{}' is not a host:port address ({})", text, why));
  };
  host_port out;
  std::string_view port_text;
  if (text.starts_with('[')) {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw bad("an IPv6 address is written [addr]:port");
    out.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) throw bad("no port");
    out.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) throw bad("no host");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) throw bad("bad port");
  out.port = static_cast<std::uint16_t>(port);
  return out;
}

unique_fd listen_tcp(const host_port& where, int backlog) {
  std::string why;
  addrinfo* list = resolve(where, true, why);
  if (!list) throw error(errc::system, "bootstrap listen", why);
  int last_err = 0;
  unique_fd fd;
  for (addrinfo* a = list; a; a = a->ai_next) {
    unique_fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!s) {
      last_err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.get(), backlog) == 0) {
      fd = std::move(s);
      break;
    }
    last_err = errno;
  }
  ::freeaddrinfo(list);
  if (!fd) throw_errno("bootstrap listen", fmt::format("cannot listen on {}", where.text()), last_err);
  return fd;
}

std::uint16_t bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) throw_errno("bootstrap", "getsockname", errno);
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  throw error(errc::invalid_argument, "bootstrap", "the rendezvous socket is not a TCP socket");
}

unique_fd connect_tcp(const host_port& where, deadline until, std::string& last_error) {
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    addrinfo* list = resolve(where, false, last_error);
    for (addrinfo* a = list; a; a = a->ai_next) {
      unique_fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (!s) {
        last_error = std::strerror(errno);
        continue;
      }
      int rc = ::connect(s.get(), a->ai_addr, a->ai_addrlen);
      int err = rc == 0 ? 0 : errno;
      if (rc != 0 && (err == EINPROGRESS || err == EINTR)) {
        // Completion is reported by writability; the error, if any, by SO_ERROR.
        if (!wait_for(s.get(), POLLOUT, until)) {
          last_error = "connect timed out";
          continue;
        }
        socklen_t len = sizeof err;
        if (::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
      if (err == 0) {
        ::freeaddrinfo(list);
        int one = 1;  // requests and replies are small and latency-bound
        ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return s;
      }
      last_error = std::strerror(err);
      if (!worth_retrying(err)) break;
    }
    if (list) ::freeaddrinfo(list);
    if (until.expired()) return {};
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(pause, std::chrono::milliseconds(until.poll_ms())));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("bootstrap", "getrandom", errno);
    got += static_cast<std::size_t>(n);
  }
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char c : raw) hex += fmt::format("{:02x}", c);
  return hex;
}

}  // namespace shoal::detail
