// How the proxy engine reaches its own PE's memory: the symmetric heap (by offset) and local buffers (by
// address). The engine applies what peers ask of this PE (puts, gets, signals, atomics) and stages its own
// puts and gets through this interface only, so the same engine serves a heap in host memory
// (host_local_memory, below) and one in GPU memory (a CUDA implementation, built on cudaMemcpyAsync on one
// stream and a tiny kernel for atomics). No CUDA here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "shoal/detail/proxy_descriptor.hpp"
#include "transport/payload_pool.hpp"

namespace shoal::detail {

// A place in this PE's memory: an offset in its symmetric heap, or (is_address) a virtual address of this
// process, as a proxy_request's `local` field and its local_is_address flag say.
struct local_ref {
  std::uint64_t value = 0;
  bool is_address = false;
  bool is_host = false;  // an address in host memory (a request's local_is_host)

  static constexpr local_ref heap(std::uint64_t offset) { return {offset, false, false}; }
  static constexpr local_ref address(const void* p) { return {reinterpret_cast<std::uintptr_t>(p), true, false}; }
  constexpr local_ref advanced(std::uint64_t bytes) const { return {value + bytes, is_address, is_host}; }
};

// One atomic on a heap word: proxy_atomic_op of proxy_atomic_type; 32-bit operands in the low half.
// Float types come with fetch, set and swap (bit moves) and fetch_add/add (float arithmetic); the codec
// rejects the rest.
struct local_atomic {
  proxy_atomic_op op = proxy_atomic_op::fetch;
  proxy_atomic_type type = proxy_atomic_type::int32;
  std::uint64_t value = 0;
  std::uint64_t compare = 0;
};

// Contract, for every implementation:
// - Operations take effect in the order they are issued (a GPU implementation issues them all to one
//   stream). That order is what makes a put_signal's signal land after its data and what makes a fence
//   free: the engine issues each peer's requests in arrival order.
// - They may be deferred until a flush: read() fills `to`, atomic() stores `*old`, and write()/signal()
//   become visible to every reader of this PE's memory (its GPU kernels and host threads) only once a
//   flush that began after them has completed. The engine issues a batch (everything one pass of its loop
//   produced), begins one flush (flush_begin()), and goes on with the next batch; it sends the batch's
//   replies and messages once flushed() says that flush completed. So a GPU implementation pays one event
//   per batch, and its copies overlap the network work of the batches after it. "Until flush()" below
//   means until such a flush completes.
// - write()'s `from` and signal()'s arguments may be reused as soon as the call returns (copy or stage
//   them), except a `from` in a lent buffer (lend()) or in a peer's window this memory adopted
//   (adopt_peer_window()), which stays unchanged until flush(); read()'s `to`
//   and atomic()'s `old` stay valid and untouched by the caller until flush().
// - Heap ranges were checked by the engine against the part of heap_bytes() that is mapped
//   (proxy_engine::heap_mapped); addresses are trusted (they come from this PE's own descriptors).
// - One thread (the proxy thread) calls all of these. Errors throw shoal::error.
class local_memory {
 public:
  virtual ~local_memory() = default;

  virtual std::uint64_t heap_bytes() const noexcept = 0;

  virtual void read(local_ref from, void* to, std::size_t bytes) = 0;
  virtual void write(local_ref to, const void* from, std::size_t bytes) = 0;
  // A real atomic on the heap word at `offset` (aligned to the type's width): atomic with respect to
  // atomics of this PE's own threads or kernels on the same word. `*old` gets the previous value (zero-
  // extended for 32-bit types) for every op, fetching or not.
  virtual void atomic(std::uint64_t offset, const local_atomic& op, std::uint64_t* old) = 0;
  // set or add on the 64-bit signal word at heap `offset`, ordered after every earlier write (release).
  virtual void signal(std::uint64_t offset, proxy_signal_op op, std::uint64_t value) = 0;
  // Completes every operation issued before it (see the contract above).
  virtual void flush() = 0;
  // The same without waiting: flush_begin() covers every operation issued so far and returns its ticket;
  // flushed(ticket) says whether that flush (and every earlier one) has completed, and when it has, does
  // what completion involves (stores read() data and atomic() old values). Tickets complete in order; a
  // flush() completes every ticket issued before it. The defaults flush at once.
  virtual std::uint64_t flush_begin() {
    flush();
    return 0;
  }
  virtual bool flushed(std::uint64_t /*ticket*/) { return true; }

  // Payload buffers: `bytes` of memory that read() fills and write() drains without a staging copy (pinned
  // host memory, for a GPU heap), or null when this memory lends none of that size or all are out. The
  // engine receives and sends large message payloads in them. A buffer goes back through give_back(),
  // and only after the flush() that completes every read() into it or write() from it.
  virtual std::byte* lend(std::size_t /*bytes*/) { return nullptr; }
  virtual void give_back(std::byte* /*buffer*/) {}

  // Payload windows (network::open_payload_window). lend_from(): lend payload buffers carved from
  // `memory` (this PE's window, which outlives this object) instead of this memory's own; false when it
  // cannot (its own buffers stay). Call before the first lend(). adopt_peer_window(): write() will take
  // `from` in `view` (a peer's window mapped here, which outlives this object) as it takes a lent buffer,
  // without staging it; false when it cannot. The defaults decline both.
  virtual bool lend_from(std::span<std::byte> /*memory*/) { return false; }
  virtual bool adopt_peer_window(std::span<const std::byte> /*view*/) { return false; }
};

// A heap in host memory the caller owns ([base, base + bytes), 8-byte aligned), e.g. the heap of a CPU-only
// job, a test, or a staging heap. Every operation is done at once; flush() has nothing to do. Atomics and
// signals use std::atomic_ref, so host threads of this PE may use atomic_ref on the same words concurrently.
// Test knobs: with `slots` it lends that many payload buffers of `slot_bytes` (copies to and from them are
// plain copies as well); with `deferred_flushes` a flush begun completes only at every third
// flushed() call, as a GPU stream's would complete later; `before_flush_begin` runs at the start of every
// flush_begin() (a test blocks in it as a CUDA call can); while `flushes_held` returns true no flush
// completes (a test holds them as a GPU stream that cannot start would). How the CPU tests drive the
// engine's lent-buffer, flush-batch and watchdog paths.
struct host_memory_knobs {
  std::size_t slots = 0;
  std::size_t slot_bytes = 0;
  bool deferred_flushes = false;
  std::function<void()> before_flush_begin;
  std::function<bool()> flushes_held;
};

class host_local_memory final : public local_memory {
 public:
  host_local_memory(void* base, std::uint64_t bytes, const host_memory_knobs& knobs = {});

  std::uint64_t heap_bytes() const noexcept override { return bytes_; }
  void read(local_ref from, void* to, std::size_t bytes) override;
  void write(local_ref to, const void* from, std::size_t bytes) override;
  void atomic(std::uint64_t offset, const local_atomic& op, std::uint64_t* old) override;
  void signal(std::uint64_t offset, proxy_signal_op op, std::uint64_t value) override;
  void flush() override { completed_ = issued_; }
  std::uint64_t flush_begin() override {
    if (before_flush_begin_) before_flush_begin_();
    return ++issued_;
  }
  bool flushed(std::uint64_t ticket) override {
    if (flushes_held_ && flushes_held_()) return completed_ >= ticket;
    if (!deferred_flushes_ || ++polls_ % 3 == 0) completed_ = issued_;
    return completed_ >= ticket;
  }
  std::byte* lend(std::size_t bytes) override {
    std::byte* buffer = lendable_.take(bytes);
    lends_ += buffer != nullptr;
    return buffer;
  }
  void give_back(std::byte* buffer) override { lendable_.give_back(buffer); }
  // Host memory needs no registration: a window is used as it is.
  bool lend_from(std::span<std::byte> memory) override;
  bool adopt_peer_window(std::span<const std::byte> /*view*/) override { return true; }

  std::byte* base() const noexcept { return base_; }
  // For tests, read while no engine runs: buffers lent so far, and those not given back yet.
  std::size_t lends() const noexcept { return lends_; }
  std::size_t lent_out() const noexcept { return lendable_.lent_out(); }

 private:
  std::byte* resolve(local_ref ref, std::size_t bytes, const char* call) const;

  std::byte* base_;
  std::uint64_t bytes_;
  std::unique_ptr<std::byte[]> lend_storage_;
  payload_pool lendable_;
  std::size_t lends_ = 0;
  bool deferred_flushes_ = false;
  std::function<void()> before_flush_begin_;
  std::function<bool()> flushes_held_;
  std::uint64_t issued_ = 0, completed_ = 0, polls_ = 0;  // flush tickets
};

// The atomic itself, on a host word; also what a CUDA implementation's reference check can call.
// Returns the previous value (zero-extended for 32-bit types).
std::uint64_t host_atomic_apply(void* word, const local_atomic& op);

}  // namespace shoal::detail
