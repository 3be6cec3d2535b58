#include "bootstrap/fd_channel.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/log.hpp"
#include "bootstrap/launch_env.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

constexpr std::uint32_t kFdMagic = 0x44465348;  // "HSFD"
// Fewer than the kernel's SCM_MAX_FD (253) per message; larger sends are split.
constexpr std::size_t kMaxFdsPerMessage = 250;
// Queued in place of a descriptor the kernel could not install (drain).
constexpr int kLostFd = -1;

struct fd_message {
  std::uint32_t magic;
  std::int32_t sender_pe;
  std::uint32_t count;
  std::uint32_t reserved;
};

sockaddr_un abstract_address(const std::string& name, socklen_t& len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::size_t n = std::min(name.size(), sizeof addr.sun_path - 1);
  std::memcpy(addr.sun_path + 1, name.data(), n);  // sun_path[0] == 0: the abstract namespace
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return addr;
}

[[noreturn]] void fail_errno(std::string_view context, std::string_view what) {
  throw error(errc::system, context, fmt::format("{}: {}", what, std::strerror(errno)));
}

}  // namespace

fd_channel::fd_channel(std::string_view secret, int pe) : pe_(pe) {
  static std::atomic<unsigned> instance{0};
  name_ = fmt::format("shoal-{}-{}-{}-{}", derive_secret({"fd channel", secret}).substr(0, 16), pe, ::getpid(),
                      instance.fetch_add(1));
  listener_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener_) fail_errno("bootstrap fd channel", "socket(AF_UNIX)");
  socklen_t len = 0;
  sockaddr_un addr = abstract_address(name_, len);
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    fail_errno("bootstrap fd channel", fmt::format("bind(@{})", name_));
  if (::listen(listener_.get(), 128) != 0) fail_errno("bootstrap fd channel", "listen");
}

fd_channel::~fd_channel() {
  for (auto& [sender, fds] : queued_)
    for (int fd : fds) ::close(fd);
}

void fd_channel::send(int to_pe, const std::string& peer_name, std::span<const int> fds, deadline until) {
  const std::string context = fmt::format("send_fds to PE {}", to_pe);
  auto it = outbound_.find(to_pe);
  if (it == outbound_.end()) {
    // The peer listens from before the rendezvous, so a refusal means it is gone; a full backlog
    // (EAGAIN) is worth waiting for.
    unique_fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s) fail_errno(context, "socket(AF_UNIX)");
    socklen_t len = 0;
    sockaddr_un addr = abstract_address(peer_name, len);
    for (;;) {
      if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0) break;
      if (errno == EINTR) continue;
      if (errno == EAGAIN && !until.expired()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      if (errno == EAGAIN)
        throw error(errc::timeout, context, fmt::format("PE {} accepted no connection in time", to_pe));
      throw error(errc::peer_failure, context,
                  fmt::format("cannot reach PE {}'s descriptor channel: {} (did PE {} exit?)", to_pe,
                              std::strerror(errno), to_pe));
    }
    it = outbound_.emplace(to_pe, std::move(s)).first;
  }
  int sock = it->second.get();

  for (std::size_t done = 0; done < fds.size();) {
    std::size_t n = std::min(kMaxFdsPerMessage, fds.size() - done);
    fd_message head{kFdMagic, pe_, static_cast<std::uint32_t>(n), 0};
    iovec iov{&head, sizeof head};
    std::vector<char> control(CMSG_SPACE(n * sizeof(int)), 0);
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(n * sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), fds.data() + done, n * sizeof(int));
    for (;;) {
      if (::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) break;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!wait_for(sock, POLLOUT, until))
          throw error(errc::timeout, context, fmt::format("PE {} took no descriptors in time", to_pe));
        continue;
      }
      if (errno == EPIPE || errno == ECONNRESET || errno == ECONNREFUSED) {
        outbound_.erase(to_pe);
        throw error(errc::peer_failure, context,
                    fmt::format("PE {} closed its descriptor channel (did it exit?)", to_pe));
      }
      fail_errno(context, "sendmsg");
    }
    done += n;
  }
}

void fd_channel::accept_all() {
  for (;;) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: nothing more; other errors surface as a timeout of the waiting recv
    }
    unique_fd conn(fd);
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::getuid()) {
      SHOAL_LOG_WARN(bootstrap, "descriptor channel: refused a connection from uid {} (pid {})", cred.uid, cred.pid);
      continue;
    }
    inbound_.push_back({std::move(conn), -1});
  }
}

bool fd_channel::drain(inbound& in) {
  for (;;) {
    fd_message head{};
    iovec iov{&head, sizeof head};
    alignas(cmsghdr) char control[CMSG_SPACE(kMaxFdsPerMessage * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(in.fd.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;  // closed or failed

    std::vector<int> got;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const unsigned char* data = CMSG_DATA(c);
      for (std::size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, data + i * sizeof(int), sizeof fd);
        got.push_back(fd);
      }
    }
    // MSG_CTRUNC with a whole header: the kernel could not install every descriptor (this process is at
    // its limit of open files) and closed the rest. The message's place in the stream is intact, so the
    // missing ones queue as kLostFd and the recv that takes them fails; the channel stays usable.
    const bool truncated = (msg.msg_flags & MSG_CTRUNC) && got.size() < head.count;
    bool sane = n == sizeof head && head.magic == kFdMagic && !(msg.msg_flags & MSG_TRUNC) &&
                (truncated || (!(msg.msg_flags & MSG_CTRUNC) && head.count == got.size())) &&
                head.count <= kMaxFdsPerMessage && head.sender_pe >= 0 && (in.pe < 0 || in.pe == head.sender_pe);
    if (!sane) {
      for (int fd : got) ::close(fd);
      SHOAL_LOG_WARN(bootstrap, "descriptor channel: dropping a connection that sent a malformed message");
      return false;
    }
    in.pe = head.sender_pe;
    auto& queue = queued_[in.pe];
    queue.insert(queue.end(), got.begin(), got.end());
    queue.insert(queue.end(), head.count - got.size(), kLostFd);
  }
}

std::vector<int> fd_channel::recv(int from_pe, std::size_t count, deadline until) {
  const std::string context = fmt::format("recv_fds from PE {}", from_pe);
  for (;;) {
    auto& queue = queued_[from_pe];
    if (queue.size() >= count) {
      std::vector<int> out(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(count));
      queue.erase(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(count));
      const auto lost = std::count(out.begin(), out.end(), kLostFd);
      if (lost == 0) return out;
      for (int fd : out)
        if (fd != kLostFd) ::close(fd);
      rlimit files{};
      ::getrlimit(RLIMIT_NOFILE, &files);
      throw error(errc::system, context,
                  fmt::format("{} of the {} descriptors PE {} sent were lost on arrival: this process is at its "
                              "limit of open files (ulimit -n {})",
                              lost, count, from_pe, files.rlim_cur));
    }
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    for (auto& in : inbound_) fds.push_back({in.fd.get(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), until.poll_ms());
    if (rc < 0 && errno != EINTR) fail_errno(context, "poll");
    if (rc == 0)
      throw error(errc::timeout, context,
                  fmt::format("PE {} sent {} of {} descriptors in time (has it reached its send_fds?)", from_pe,
                              queued_[from_pe].size(), count));
    if (rc < 0) continue;
    bool lost_sender = false;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      inbound& in = inbound_[i - 1];
      if (!drain(in)) {
        lost_sender |= in.pe == from_pe;
        in.fd.reset();
      }
    }
    std::erase_if(inbound_, [](const inbound& in) { return !in.fd; });
    if (fds[0].revents) accept_all();
    if (lost_sender && queued_[from_pe].size() < count)
      throw error(errc::peer_failure, context,
                  fmt::format("PE {} closed its descriptor channel after sending {} of {} descriptors (did it exit?)",
                              from_pe, queued_[from_pe].size(), count));
  }
}

}  // namespace shoal::detail
