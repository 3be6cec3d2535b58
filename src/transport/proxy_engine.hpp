// The proxy engine: the host thread of a PE that drains the PE's proxy ring and carries out each request
// over the network (protocol v1: messages only, so it works for any memory the PE's local_memory reaches,
// GPU memory included). Peers' requests for this PE's memory are served by the same thread. Make one per
// PE after the ring and the network exist and before the collective that lets peers send; start() it,
// and stop() it after the job's last quiet and barrier. docs/proxy-design.md ("The proxy engine").
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "shoal/detail/proxy_ring.hpp"
#include "shoal/error.hpp"
#include "transport/local_memory.hpp"
#include "transport/network.hpp"

namespace shoal::detail {

// Puts and gets travel in chunks of this many bytes at most: a chunk is one message and one staging
// buffer, so this bounds the memory a request pins at either end and lets chunks of one request overlap.
inline constexpr std::uint64_t kProxyChunkBytes = std::uint64_t{1} << 20;
// Data bytes in flight from one PE to one peer: put chunks sent but not acknowledged plus get chunks asked
// for but not received. Four chunks keep a link busy while bounding the target's staging memory.
inline constexpr std::uint64_t kProxyPeerWindowBytes = 4 * kProxyChunkBytes;

// Payloads of at least this many bytes travel in buffers lent by the local memory (local_memory::lend),
// both ways: a GPU heap's copy engines then fill and drain them directly, without staging copies (and
// across a payload window, by reference). Smaller ones (signals, atomics, small puts) go by copy.
inline constexpr std::uint64_t kProxyLendMinBytes = std::uint64_t{32} << 10;

struct proxy_engine_options {
  std::uint64_t chunk_bytes = kProxyChunkBytes;             // > 0; tests use small chunks to make many
  std::uint64_t peer_window_bytes = kProxyPeerWindowBytes;  // one chunk is always allowed
  std::uint32_t poll_batch = 64;                            // descriptors taken from the ring per pass
  std::uint64_t lend_min_bytes = kProxyLendMinBytes;        // smallest payload in a lent buffer
  // While replies from a peer are awaited and nothing arrived from it for this long, the engine sends it a
  // ping: a dead peer then fails that send (network_status::peer_failed) instead of leaving a silent hang.
  std::chrono::milliseconds probe_interval{100};
  // When one pass of the proxy thread's loop has run this long, a watchdog thread logs a warning naming
  // the step it is in: a CUDA or network call that does not return stalls every request of the PE, and
  // the kernels waiting on them only time out (SHOAL_WAIT_TIMEOUT) without saying why. It warns too when
  // a flush has not completed this long after it began (the thread goes on, but nothing that waits for
  // the flush does). 0: no watchdog.
  std::chrono::milliseconds stall_warning{5000};
};

// What holds the proxy up: a pass of its thread that has not ended (how long it has run and the step it
// is in), or, with the thread still running, a flush of its local memory (its CUDA stream) that has not
// completed `seconds` after it began (`flush`).
struct proxy_stall {
  double seconds = 0;
  const char* step = "";
  bool flush = false;
};

// Counters for tests and diagnostics (read while running: each is exact, the set is not a snapshot).
struct proxy_engine_counters {
  std::uint64_t requests = 0;       // ring requests consumed
  std::uint64_t messages_sent = 0;  // request and reply messages, pings included
  std::uint64_t data_chunks = 0;    // put_data and get_request messages sent by this PE as initiator
  std::uint64_t served = 0;         // request messages from peers (and itself) applied to this PE's memory
  std::uint64_t pings = 0;
  std::uint64_t borrowed = 0;  // payloads that arrived by reference, read in place in the sender's window
};

class proxy_engine_core;

class proxy_engine {
 public:
  // `ring`: this PE's ring, initialized, with no other consumer. `net`: this PE's network, used only by the
  // engine's thread from start() on (its handlers kProxyRequestHandler and kProxyReplyHandler are installed
  // here). `memory`: this PE's heap and local buffers. `limits`: the job's (n_pes must match the network,
  // heap_bytes the memory, completion_slots the ring's result slots). All must outlive the engine.
  // Throws shoal::error(invalid_argument) when they do not match. Until heap_mapped() says otherwise,
  // the whole heap (limits.heap_bytes) counts as mapped.
  proxy_engine(const proxy_ring_view& ring, network& net, local_memory& memory, const proxy_limits& limits,
               const proxy_engine_options& options = {});
  ~proxy_engine();  // stop() without throwing
  proxy_engine(const proxy_engine&) = delete;
  proxy_engine& operator=(const proxy_engine&) = delete;

  // Starts the proxy thread. Once only.
  void start();
  // Stops the thread and the ring (producers waiting on it return consumer_stopped), then check()s.
  // Bounded: it waits for nothing on the network. Requests still in flight are abandoned, and this PE
  // stops serving its peers, so call it after the job's last quiet and barrier. Idempotent.
  void stop();
  // Throws the first failure as shoal::error: peer_failure when a peer failed (its PE and the request are
  // named), internal when a descriptor or a message did not decode or the engine broke an invariant. A
  // failure also stops the ring, so blocked producers return consumer_stopped and then call this.
  void check() const;
  bool failed() const noexcept;
  // The bytes of this PE's heap that are mapped (a heap that grows maps a prefix of limits.heap_bytes):
  // this PE's requests and peers' messages that name heap bytes beyond them fail the engine with an error
  // naming the range, where the copy into unmapped memory would fail with a bare CUDA error. Any thread,
  // any time; call it after mapping more and before any PE can address the new bytes (heaps grow
  // collectively, so every PE's mapped size is the same once the growth's meeting is over).
  void heap_mapped(std::uint64_t bytes) noexcept;
  proxy_engine_counters counters() const noexcept;
  // The current pass of the proxy thread, when it has run for at least `at_least`; else the oldest flush
  // not completed, when it began at least `at_least` ago; nullopt while neither holds.
  std::optional<proxy_stall> stall(std::chrono::milliseconds at_least) const;

 private:
  void halt() noexcept;  // stop() without check()
  void watch();          // the watchdog thread's body (options.stall_warning)

  std::unique_ptr<proxy_engine_core> core_;
  std::chrono::milliseconds stall_warning_;
  std::atomic<bool> stop_requested_{false};
  bool started_ = false;
  std::thread thread_;
  std::mutex watch_mutex_;
  std::condition_variable watch_wakeup_;  // stop() ends the watchdog's sleep
  std::thread watchdog_;
};

}  // namespace shoal::detail
