// The default bootstrap: a star of TCP connections through the rendezvous hub in PE 0 (see hub.hpp),
// plus Unix-domain descriptor passing among node-local PEs (see fd_channel.hpp).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/fd_channel.hpp"
#include "bootstrap/hub.hpp"
#include "bootstrap/placed_bootstrap.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {

struct tcp_bootstrap_options {
  int pe = 0;
  int n_pes = 1;
  std::string addr;       // host:port of the hub; PE 0 with no listen_fd binds it (port 0: any free port)
  std::string secret;     // every PE of the job presents the same one
  unique_fd listen_fd;    // PE 0 only, optional: an already-listening socket bound to addr
  double timeout_s = 60;  // SHOAL_BOOTSTRAP_TIMEOUT
  std::string host;       // node identity (SHOAL_NODE_ID or the host name)
  int emulate_nodes = 1;  // SHOAL_EMULATE_NODES
};

class tcp_bootstrap final : public placed_bootstrap {
 public:
  // Collective over all PEs: returns once every PE arrived and the table is known. Throws shoal::error
  // naming the PE(s) at fault when the rendezvous fails or runs past the timeout.
  explicit tcp_bootstrap(tcp_bootstrap_options options);
  // Says goodbye to the hub; PE 0 then waits (at most the timeout) for the others' goodbyes, so the hub
  // outlives every PE's last collective.
  ~tcp_bootstrap() override;

  int pe() const noexcept override { return pe_; }
  int n_pes() const noexcept override { return n_pes_; }

  void all_gather(const void* mine, void* all, std::size_t bytes) override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  void barrier() override;
  void alltoall(const void* send, void* recv, std::size_t bytes) override;
  void send_fds(int local_peer, std::span<const int> fds) override;
  std::vector<int> recv_fds(int local_peer, std::size_t count) override;

 private:
  // One round trip to the hub: sends coll + data, receives `out.size()` bytes of result.
  void collective(const wire::coll_header& coll, std::span<const std::byte> data, std::span<std::byte> out);
  // Reads the hub's next message header, which must be `type` number `seq`; turns a failure message, a
  // closed connection or the deadline into the matching shoal::error. `what`: "during all_gather #5".
  wire::header expect(wire::msg_type type, std::uint64_t seq, std::string_view what, deadline until);
  void read_payload(std::span<std::byte> out, std::string_view what, deadline until);
  [[noreturn]] void fail(errc category, std::string_view context, std::string detail);
  deadline reply_deadline() const;

  int pe_;
  int n_pes_;
  std::string where_;  // hub address, for messages
  double timeout_s_;
  std::unique_ptr<hub> hub_;  // PE 0 only
  std::unique_ptr<fd_channel> fds_;
  unique_fd conn_;  // to the hub
  std::vector<wire::peer_info> table_;


  std::mutex mutex_;                    // one collective at a time on the hub connection
  std::uint64_t seq_ = 0;               // collectives started
  std::optional<shoal::error> broken_;  // once failed, every later call repeats the failure
  std::mutex fd_mutex_;
};

}  // namespace shoal::detail
