// Passing open file descriptors between the PEs of one node: each PE listens on an abstract-namespace
// Unix socket (no file-system entry, gone when the process is) and a sender connects once per peer and
// sends SCM_RIGHTS messages over SOCK_SEQPACKET, which keeps message boundaries.
//
// Not thread-safe: the owner serialises calls. Only processes of the same user are accepted.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/socket.hpp"

namespace shoal::detail {

class fd_channel {
 public:
  // Starts listening. The name is derived from (a hash of) the job secret, the pe and this process, so
  // jobs and repeated inits in one process never collide, and the secret itself is not published.
  fd_channel(std::string_view secret, int pe);
  ~fd_channel();  // closes descriptors that arrived but were never taken
  fd_channel(const fd_channel&) = delete;
  fd_channel& operator=(const fd_channel&) = delete;

  // The abstract socket name (without its leading NUL), for the rendezvous table.
  const std::string& name() const noexcept { return name_; }

  // Sends duplicates of `fds` to PE `to_pe`, which listens on `peer_name`. Returns once the kernel took
  // them (the caller may close its copies). Throws shoal::error: errc::peer_failure when the peer is gone,
  // errc::timeout past `until`.
  void send(int to_pe, const std::string& peer_name, std::span<const int> fds, deadline until);
  // Returns `count` descriptors sent by PE `from_pe`, in the order sent; the caller owns them. Messages
  // from other senders that arrive meanwhile are kept for their own recv. Throws like send, and
  // errc::system when some of the `count` could not be installed (the process was at its limit of open
  // files): they are taken off the queue and closed all the same, so the next recv from that PE gets the
  // descriptors sent after them.
  std::vector<int> recv(int from_pe, std::size_t count, deadline until);

 private:
  struct inbound {
    unique_fd fd;
    int pe = -1;  // learnt from its first message
  };
  void accept_all();
  // Reads every message waiting on `in`; false once the connection is closed or unusable.
  bool drain(inbound& in);

  int pe_;
  std::string name_;
  unique_fd listener_;
  std::map<int, unique_fd> outbound_;      // by destination pe, connected on first send
  std::vector<inbound> inbound_;           // accepted connections
  std::map<int, std::deque<int>> queued_;  // received descriptors by sender pe
};

}  // namespace shoal::detail
