// The rendezvous hub: a thread in PE 0 that every PE (PE 0 too) connects to once. It checks each hello,
// sends everyone the table when all PEs are in, and serves the bootstrap collectives by gathering every
// PE's part and sending back results. One connection per PE: O(n_pes) sockets, no start-up mesh.
//
// It turns every fault it sees into one failure message sent to every connected PE: a PE that never
// arrives or does not enter a collective within the timeout, a PE whose connection closes without a
// goodbye (it died), PEs that disagree (job size, duplicate pe, different collectives). Connections that
// do not present the job's secret or a well-formed hello are dropped with a warning and do not count.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"

namespace shoal::detail {

struct hub_options {
  unique_fd listener;  // listening TCP socket; the hub owns it
  std::string where;   // its address, for messages
  std::string secret;
  int n_pes = 0;
  double timeout_s = 60;
};

class hub {
 public:
  explicit hub(hub_options options);  // starts the thread
  // Waits for the thread: until every PE said goodbye or the failure was delivered, at most the timeout
  // after finish() (called here if it was not).
  ~hub();
  hub(const hub&) = delete;
  hub& operator=(const hub&) = delete;

  // PE 0 finalizes: the remaining PEs' goodbyes are awaited for at most the timeout from now.
  void finish() noexcept;
  // PE 0 failed on its own: stop at once (after delivering a failure already decided).
  void abort() noexcept;
  // The failure the hub decided, if any. PE 0 reads it here rather than over its connection, which the
  // hub may have closed before PE 0's own hello arrived.
  std::optional<wire::failure> failure() const;

  // Shared between the owner and the thread.
  struct verdict {
    mutable std::mutex mutex;
    std::optional<wire::failure> failure;
  };

 private:
  struct loop;
  void command(int what) noexcept;

  verdict verdict_;
  std::unique_ptr<loop> loop_;
  unique_fd wake_;  // eventfd that interrupts the thread's poll()
  std::atomic<int> command_{0};
  std::thread thread_;
};

}  // namespace shoal::detail
