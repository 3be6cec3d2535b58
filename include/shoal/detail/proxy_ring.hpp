// The proxy ring: the queue of proxy descriptors between a PE's device calls (producers) and its proxy
// thread (the one consumer), with credits for back-pressure and completion tracked per request, so a
// quiet waits only for the requests issued before it. Producer functions are SHOAL_HD and run in kernels
// or host threads; the consumer is a host class. Every wait polls a caller's abort callback and the
// consumer's stop word, so a dead proxy is an error, never a hang. docs/proxy-design.md has the protocol.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "shoal/detail/proxy_descriptor.hpp"

#if defined(__CUDACC__)
#include <cuda/atomic>
#else
#include <atomic>
#endif

// The producer waits are SHOAL_HD templates that call the caller's callbacks, which are host-only or
// device-only; this tells nvcc to check the call in the instantiation actually used, not in both.
#if defined(__CUDACC__)
#define SHOAL_PROXY_CALLBACK_TEMPLATE _Pragma("nv_exec_check_disable")
#else
#define SHOAL_PROXY_CALLBACK_TEMPLATE
#endif

namespace shoal::detail {

// System-scope atomic accesses to the shared words: cuda::atomic_ref when nvcc compiles (device and host
// passes alike), std::atomic_ref otherwise. Both are plain lock-free 64-bit accesses on the same memory,
// so a proxy thread built by the host compiler and kernels built by nvcc can share a ring.
namespace proxy_atomic {
#if defined(__CUDACC__)
using ref = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>;
inline constexpr auto kRelaxed = cuda::std::memory_order_relaxed;
inline constexpr auto kAcquire = cuda::std::memory_order_acquire;
inline constexpr auto kRelease = cuda::std::memory_order_release;
#else
using ref = std::atomic_ref<std::uint64_t>;
inline constexpr auto kRelaxed = std::memory_order_relaxed;
inline constexpr auto kAcquire = std::memory_order_acquire;
inline constexpr auto kRelease = std::memory_order_release;
#endif

SHOAL_HD inline std::uint64_t load_relaxed(std::uint64_t& word) { return ref(word).load(kRelaxed); }
SHOAL_HD inline std::uint64_t load_acquire(std::uint64_t& word) { return ref(word).load(kAcquire); }
SHOAL_HD inline void store_relaxed(std::uint64_t& word, std::uint64_t value) { ref(word).store(value, kRelaxed); }
SHOAL_HD inline void store_release(std::uint64_t& word, std::uint64_t value) { ref(word).store(value, kRelease); }
SHOAL_HD inline std::uint64_t fetch_add_relaxed(std::uint64_t& word, std::uint64_t value) {
  return ref(word).fetch_add(value, kRelaxed);
}
}  // namespace proxy_atomic

// Sequence numbers are 64-bit tickets that never wrap in practice (2^64 requests), but every comparison
// is a signed difference anyway, so a ring started near 2^64 (as the tests do) behaves the same.
SHOAL_HD constexpr std::int64_t proxy_seq_diff(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::int64_t>(a - b);
}

// Words the consumer writes and producers read. Each on its own 64-byte line: producers poll them.
struct proxy_ring_control {
  alignas(64) std::uint64_t tail;       // tickets < tail are consumed; their slots are free (credits)
  alignas(64) std::uint64_t completed;  // every request < completed is complete (the watermark)
  alignas(64) std::uint64_t stopped;    // nonzero once the proxy thread stopped or failed; never cleared
};

// Where a ring's parts live, as one trivially copyable value for kernels and threads. `head` is touched
// only by producers (device memory in production); the rest is shared with the consumer (pinned host
// memory in production, plain memory in tests).
struct proxy_ring_view {
  std::uint64_t* head = nullptr;          // next ticket; producers fetch_add it
  proxy_ring_control* control = nullptr;  // consumer -> producers
  proxy_descriptor* slots = nullptr;      // [capacity]; producers -> consumer
  std::uint64_t* done = nullptr;          // [window]; done[s % window] == s + 1 once request s is complete
  std::uint64_t* results = nullptr;       // [result_slots]; old values of fetching atomics
  std::uint32_t capacity = 0;             // descriptors in flight between producers and consumer; power of two
  std::uint32_t window = 0;               // requests consumed but not complete, at most; power of two >= capacity
  std::uint32_t result_slots = 0;
};
static_assert(std::is_trivially_copyable_v<proxy_ring_view>, "kernels take the view by value");

// Sizes a ring and carves its shared part out of one allocation.
struct proxy_ring_layout {
  std::uint32_t capacity = 1024;
  std::uint32_t window = 4096;
  std::uint32_t result_slots = 1024;

  static constexpr bool power_of_two(std::uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }
  constexpr bool valid() const {
    return power_of_two(capacity) && power_of_two(window) && window >= capacity &&
           result_slots <= kProxyMaxCompletionSlots;
  }
  static constexpr std::size_t round_up(std::size_t bytes) { return (bytes + 63) / 64 * 64; }
  // Bytes of the shared part (control, slots, done, results), each part 64-byte aligned.
  constexpr std::size_t shared_bytes() const {
    return round_up(sizeof(proxy_ring_control)) + std::size_t{capacity} * sizeof(proxy_descriptor) +
           round_up(std::size_t{window} * 8) + round_up(std::size_t{result_slots} * 8);
  }
  // `shared` must be 64-byte aligned and shared_bytes() long; `head` is one word the producers reach.
  proxy_ring_view carve(void* shared, std::uint64_t* head) const {
    auto* base = static_cast<std::byte*>(shared);
    proxy_ring_view v;
    v.head = head;
    v.control = reinterpret_cast<proxy_ring_control*>(base);
    base += round_up(sizeof(proxy_ring_control));
    v.slots = reinterpret_cast<proxy_descriptor*>(base);
    base += std::size_t{capacity} * sizeof(proxy_descriptor);
    v.done = reinterpret_cast<std::uint64_t*>(base);
    base += round_up(std::size_t{window} * 8);
    v.results = reinterpret_cast<std::uint64_t*>(base);
    v.capacity = capacity;
    v.window = window;
    v.result_slots = result_slots;
    return v;
  }
};

// Puts a ring in its starting state, its first ticket `first_sequence`. Call before any producer or
// consumer touches it. Each slot and done word is set as if the lap before the first had been published,
// consumed and completed, so zeroed memory never reads as a published descriptor or a completion. Writes
// *head too: when head is device memory, the device layer copies first_sequence there instead.
inline void proxy_ring_initialize(const proxy_ring_view& ring, std::uint64_t first_sequence = 0) {
  if (ring.head != nullptr) *ring.head = first_sequence;
  ring.control->tail = first_sequence;
  ring.control->completed = first_sequence;
  ring.control->stopped = 0;
  for (std::uint32_t i = 0; i < ring.capacity; ++i) {
    const std::uint64_t s = first_sequence + i;
    ring.slots[s & (ring.capacity - 1)] = proxy_descriptor{};
    ring.slots[s & (ring.capacity - 1)].words[proxy_descriptor::kSequenceWord] = s - ring.capacity;
  }
  for (std::uint32_t i = 0; i < ring.window; ++i) {
    const std::uint64_t s = first_sequence + i;
    ring.done[s & (ring.window - 1)] = s + 1 - ring.window;
  }
  for (std::uint32_t i = 0; i < ring.result_slots; ++i) ring.results[i] = 0;
}

// ---- Producer side (any number of threads of one PE, host or device) ----

// The abort callback of every wait: bool(std::uint64_t polls), called after each poll that found the
// condition false, with the number of such polls so far. It returns true to give up (the wait then
// returns proxy_status::aborted). It is also where a caller backs off: a device caller reads its clock
// every few dozen polls, a host caller yields. The consumer's stop word is read every
// kProxyStopCheckInterval polls, starting with the first.
inline constexpr std::uint64_t kProxyStopCheckInterval = 64;

struct proxy_ticket {
  std::uint64_t sequence = 0;
  proxy_status status = proxy_status::ok;
};

// Polls ready() until it holds (ok), the consumer stops (consumer_stopped) or abort gives up (aborted).
// A condition that holds by the time of the failure check still returns ok.
SHOAL_PROXY_CALLBACK_TEMPLATE
template <typename Ready, typename Abort>
SHOAL_HD proxy_status proxy_spin(const proxy_ring_view& ring, Ready&& ready, Abort&& abort) {
  for (std::uint64_t polls = 0;; ++polls) {
    if (ready()) return proxy_status::ok;
    if (polls % kProxyStopCheckInterval == 0 && proxy_atomic::load_acquire(ring.control->stopped) != 0)
      return ready() ? proxy_status::ok : proxy_status::consumer_stopped;
    if (abort(polls)) return ready() ? proxy_status::ok : proxy_status::aborted;
  }
}

// Takes the next ticket and waits for its slot to be free: the consumer must have consumed the request
// `capacity` tickets earlier. On failure the ticket stays taken and is never published, so the consumer
// stalls there: a failed ring is dead and the host tears it down (the error goes to the user).
SHOAL_PROXY_CALLBACK_TEMPLATE
template <typename Abort>
SHOAL_HD proxy_ticket proxy_reserve(const proxy_ring_view& ring, Abort&& abort) {
  // Relaxed: the ticket orders nothing by itself; the slot's contents are ordered by publish's release.
  const std::uint64_t ticket = proxy_atomic::fetch_add_relaxed(*ring.head, 1);
  // Acquire on tail: the consumer's reads of the slot's previous descriptor happen before our writes.
  auto slot_free = [&] {
    return proxy_seq_diff(ticket, proxy_atomic::load_acquire(ring.control->tail)) <
           static_cast<std::int64_t>(ring.capacity);
  };
  return {ticket, proxy_spin(ring, slot_free, abort)};
}

// Writes descriptor `d` into ticket's slot and publishes it: words 1..7 first, then the sequence word with
// release, so a consumer that reads the sequence with acquire sees the whole descriptor.
SHOAL_HD inline void proxy_publish(const proxy_ring_view& ring, std::uint64_t ticket, const proxy_descriptor& d) {
  proxy_descriptor& slot = ring.slots[ticket & (ring.capacity - 1)];
  for (unsigned i = 1; i < proxy_descriptor::kWords; ++i) slot.words[i] = d.words[i];
  proxy_atomic::store_release(slot.words[proxy_descriptor::kSequenceWord], ticket);
}

// Encodes, reserves and publishes one request; its sequence is the ticket (r.sequence is ignored). A
// request that does not encode fails before taking a ticket, leaving the ring usable.
SHOAL_PROXY_CALLBACK_TEMPLATE
template <typename Abort>
SHOAL_HD proxy_ticket proxy_post(const proxy_ring_view& ring, proxy_request r, Abort&& abort) {
  r.sequence = 0;
  const proxy_encoded e = encode(r);
  if (e.status != proxy_status::ok) return {0, e.status};
  const proxy_ticket t = proxy_reserve(ring, abort);
  if (t.status != proxy_status::ok) return t;
  proxy_publish(ring, t.sequence, e.descriptor);
  return t;
}

// Tickets taken so far: every request reserved before this call (by any producer, in happens-before
// order) has a smaller sequence. A quiet waits for all requests before this point.
SHOAL_HD inline std::uint64_t proxy_issued(const proxy_ring_view& ring) {
  return proxy_atomic::load_relaxed(*ring.head);
}

// Whether every request with a sequence < `sequence` is complete.
SHOAL_HD inline bool proxy_complete_before(const proxy_ring_view& ring, std::uint64_t sequence) {
  return proxy_seq_diff(proxy_atomic::load_acquire(ring.control->completed), sequence) >= 0;
}

// Whether request `sequence` is complete, whatever the state of earlier ones. Its done word may already
// belong to request sequence + window, but that one cannot be consumed before the watermark passes
// `sequence`, so the watermark answers then.
SHOAL_HD inline bool proxy_is_complete(const proxy_ring_view& ring, std::uint64_t sequence) {
  if (proxy_atomic::load_acquire(ring.done[sequence & (ring.window - 1)]) == sequence + 1) return true;
  return proxy_seq_diff(proxy_atomic::load_acquire(ring.control->completed), sequence) > 0;
}

// quiet-style wait: returns ok once every request < sequence is complete.
SHOAL_PROXY_CALLBACK_TEMPLATE
template <typename Abort>
SHOAL_HD proxy_status proxy_wait_complete_before(const proxy_ring_view& ring, std::uint64_t sequence, Abort&& abort) {
  return proxy_spin(
      ring, [&] { return proxy_complete_before(ring, sequence); }, abort);
}

// Waits for one request (a blocking put's source reuse, a fetching atomic's result), out of order.
SHOAL_PROXY_CALLBACK_TEMPLATE
template <typename Abort>
SHOAL_HD proxy_status proxy_wait_complete(const proxy_ring_view& ring, std::uint64_t sequence, Abort&& abort) {
  return proxy_spin(
      ring, [&] { return proxy_is_complete(ring, sequence); }, abort);
}

// The old value a fetching atomic left in its result slot; read after proxy_wait_complete returned ok for
// it. The slot belongs to the requester until it has read it: allocating slots is the caller's business.
SHOAL_HD inline std::uint64_t proxy_result(const proxy_ring_view& ring, std::uint32_t slot) {
  return proxy_atomic::load_relaxed(ring.results[slot]);
}

// ---- Consumer side (the proxy thread; one thread calls all of these) ----

class proxy_ring_consumer {
 public:
  // Takes over a ring right after proxy_ring_initialize (positions are read from the control words).
  explicit proxy_ring_consumer(const proxy_ring_view& ring)
      : ring_(ring), next_(ring.control->tail), watermark_(ring.control->completed) {}

  // The next request in ticket order once its producer has published it. nullopt when it is not published
  // yet, when `window` requests are consumed but incomplete (complete some first), or after stop(). The
  // slot is copied out and returned to the producers (tail, release) before this returns.
  std::optional<proxy_descriptor> poll() {
    if (stopped_ || window_full()) return std::nullopt;
    proxy_descriptor& slot = ring_.slots[next_ & (ring_.capacity - 1)];
    const std::uint64_t seen = proxy_atomic::load_acquire(slot.words[proxy_descriptor::kSequenceWord]);
    if (seen != next_) return std::nullopt;
    proxy_descriptor out;
    out.words[proxy_descriptor::kSequenceWord] = seen;
    for (unsigned i = 1; i < proxy_descriptor::kWords; ++i) out.words[i] = slot.words[i];
    ++next_;
    proxy_atomic::store_release(ring_.control->tail, next_);
    return out;
  }

  // Marks consumed request `sequence` complete, in any order, and advances the watermark over every
  // leading complete request. Its done word is written with release, so a producer that sees it also sees
  // everything the proxy did for the request. completion_invalid (state unchanged) for a request not
  // consumed yet or already complete.
  proxy_status complete(std::uint64_t sequence) {
    if (proxy_seq_diff(sequence, watermark_) < 0 || proxy_seq_diff(sequence, next_) >= 0)
      return proxy_status::completion_invalid;
    std::uint64_t& done = ring_.done[sequence & (ring_.window - 1)];
    if (proxy_atomic::load_relaxed(done) == sequence + 1) return proxy_status::completion_invalid;
    proxy_atomic::store_release(done, sequence + 1);
    const std::uint64_t before = watermark_;
    while (proxy_seq_diff(watermark_, next_) < 0 &&
           proxy_atomic::load_relaxed(ring_.done[watermark_ & (ring_.window - 1)]) == watermark_ + 1)
      ++watermark_;
    if (watermark_ != before) proxy_atomic::store_release(ring_.control->completed, watermark_);
    return proxy_status::ok;
  }

  // Completes a fetching atomic: stores its old value in `result_slot`, then completes the request.
  proxy_status complete(std::uint64_t sequence, std::uint32_t result_slot, std::uint64_t value) {
    if (result_slot >= ring_.result_slots) return proxy_status::bad_completion;
    if (proxy_seq_diff(sequence, watermark_) < 0 || proxy_seq_diff(sequence, next_) >= 0 ||
        proxy_atomic::load_relaxed(ring_.done[sequence & (ring_.window - 1)]) == sequence + 1)
      return proxy_status::completion_invalid;
    proxy_atomic::store_relaxed(ring_.results[result_slot], value);
    return complete(sequence);
  }

  // Stops consuming for good: every producer wait, now or later, returns consumer_stopped unless its
  // condition already holds. Called on shutdown and on a fatal error (a failed endpoint).
  void stop() {
    stopped_ = true;
    proxy_atomic::store_release(ring_.control->stopped, 1);
  }

  std::uint64_t consumed() const { return next_; }        // the next ticket poll() returns
  std::uint64_t completed() const { return watermark_; }  // every request < completed() is complete
  bool window_full() const { return proxy_seq_diff(next_, watermark_) >= static_cast<std::int64_t>(ring_.window); }
  const proxy_ring_view& view() const { return ring_; }

 private:
  proxy_ring_view ring_;
  std::uint64_t next_;
  std::uint64_t watermark_;
  bool stopped_ = false;
};

}  // namespace shoal::detail
