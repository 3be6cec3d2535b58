// An in-process `network`: N PEs of one process joined by a shared fabric, for testing the proxy engine
// (and anything else above network.hpp) without UCX. Messages travel through per-destination queues (so
// one PE's messages to another arrive in order), one-sided operations act on exposed memory directly, and
// every completion and handler runs only in the owning PE's progress(), as network.hpp requires. It can
// hold back and reorder completions, and "kill" a PE so that its peers see peer_failed. Test
// infrastructure: not a transport for real jobs.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/network.hpp"

namespace shoal::detail {

struct loopback_options {
  // Hold back completions of sends and one-sided operations and run them later, in random order (each
  // progress() call releases a random subset). Messages themselves still arrive in order per pair.
  bool reorder_completions = false;
  std::uint64_t seed = 1;
};

class loopback_fabric {
 public:
  explicit loopback_fabric(int n_pes, const loopback_options& options = {});
  ~loopback_fabric();
  loopback_fabric(const loopback_fabric&) = delete;
  loopback_fabric& operator=(const loopback_fabric&) = delete;

  int n_pes() const noexcept;

  // The network of PE `pe` (once per PE). It shares the fabric, which lives as long as any of them.
  std::unique_ptr<network> connect(int pe);

  // PE `pe` dies: messages queued for it are dropped, and from now on every send or one-sided operation to
  // it completes with network_status::peer_failed and every expose() skips it. Its own network goes
  // silent: its progress() does nothing and its operations never complete (as a dead process would).
  // Messages it sent before dying are still delivered.
  void kill(int pe);
  bool killed(int pe) const;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace shoal::detail
