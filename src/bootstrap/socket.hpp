// POSIX socket helpers of the bootstrap: an owning descriptor, deadlines, and full reads and writes that
// survive EINTR and partial transfers and give up at a deadline instead of blocking forever.
// Every descriptor made here is close-on-exec and non-blocking; waits go through poll().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace shoal::detail {

// Owns one file descriptor; closes it on destruction. Move-only.
class unique_fd {
 public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept;
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// A point in (steady) time after which a wait gives up.
class deadline {
 public:
  using clock = std::chrono::steady_clock;
  static deadline after(double seconds);
  static deadline at(clock::time_point when) { return deadline(when); }

  bool expired() const { return clock::now() >= when_; }
  // Milliseconds left, rounded up so a wait never ends early; 0 once expired; capped to fit poll().
  int poll_ms() const;
  clock::time_point when() const { return when_; }
  deadline earliest(deadline other) const { return other.when_ < when_ ? other : *this; }

 private:
  explicit deadline(clock::time_point when) : when_(when) {}
  clock::time_point when_;
};

enum class io_status { ok, closed, timed_out, failed };  // failed: errno says why
const char* to_string(io_status status) noexcept;

// Sends/receives exactly `bytes` bytes on a non-blocking socket before `until`. `closed` means the peer
// shut the connection (EOF, reset or broken pipe) before all bytes moved. Never raises SIGPIPE.
io_status write_all(int fd, const void* data, std::size_t bytes, deadline until);
io_status read_all(int fd, void* data, std::size_t bytes, deadline until);
// Waits until `fd` has the `events` (POLLIN/POLLOUT) of poll(); false when `until` passed first.
bool wait_for(int fd, short events, deadline until);

void set_nonblocking(int fd);
void set_cloexec(int fd);

struct host_port {
  std::string host;
  std::uint16_t port = 0;
  std::string text() const;  // "host:port", brackets around IPv6 literals
};
// Accepts "host:port" and "[ipv6]:port". Throws shoal::error(errc::invalid_argument) naming `what`.
host_port parse_host_port(std::string_view text, std::string_view what);

// A TCP socket bound to `where` (port 0: any free port) and listening. Throws shoal::error(errc::system).
unique_fd listen_tcp(const host_port& where, int backlog);
std::uint16_t bound_port(int fd);
// Connects to `where`, retrying while nobody listens yet (the hub may start after this PE) until `until`.
// Returns an empty fd on timeout with the last failure in `last_error`. The socket is non-blocking.
unique_fd connect_tcp(const host_port& where, deadline until, std::string& last_error);

// This host's name (for node grouping), or "localhost" when it has none.
std::string host_name();
// `bytes` random bytes from the kernel, as lower-case hex.
std::string random_hex(std::size_t bytes);

}  // namespace shoal::detail
