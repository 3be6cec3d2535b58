// Device calls to PEs that ptr() cannot reach (another node, or another emulated node): each becomes one
// descriptor in this PE's proxy ring, which the PE's proxy thread carries out over the network
// (docs/proxy-design.md). rma.cuh, signal.cuh, atomic.cuh, ordering.cuh, barrier.cuh and the collectives
// call these when the target is not mapped; the public calls keep their contracts:
//   - the proxy thread applies one PE's requests to one peer in ticket order, so fence() needs no
//     descriptor and a put_signal's signal lands after its data;
//   - a request is complete once its target applied it (puts, signals, atomics) or its data landed here
//     (gets); quiet() waits until every request this PE posted before it is complete;
//   - blocking puts and gets wait for their own request, fetching atomics for their old value.
// A failure (the proxy stopped because a peer died, or SHOAL_WAIT_TIMEOUT passed) traps with a report:
// the host then raises the proxy's own error, which names the peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "shoal/detail/proxy_channel.hpp"
#include "shoal/dev/detail/spin.cuh"
#include "shoal/dev/scope.cuh"
#include "shoal/device_handle.hpp"
#include "shoal/types.hpp"

namespace shoal::detail {

// The abort callback of ring waits on the device: backs off, then gives up once the handle's wait
// timeout has passed. Ring words live in host memory, so every poll is a PCIe read: many threads polling
// without pause would slow the proxy's own writes they wait for. The pause grows to about 1 us.
struct proxy_device_deadline {
  std::uint64_t start;
  std::uint64_t timeout_ns;
  __device__ bool operator()(std::uint64_t polls) const {
    if (polls >= 4) __nanosleep(polls < 64 ? 16 * unsigned(polls) : 1024);
    return timeout_ns != 0 && polls % 64 == 63 && global_timer_ns() - start > timeout_ns;
  }
};
__device__ inline proxy_device_deadline proxy_deadline(const device_handle& h) {
  return {global_timer_ns(), h.wait_timeout_ns};
}

[[noreturn]] __device__ inline void proxy_trap(const device_handle& h, const char* call, int pe, const char* why) {
  printf("shoal: PE %d: %s to PE %d through the proxy failed: %s\n", h.pe, call, pe, why);
  __trap();
}
__device__ inline const char* proxy_failure(proxy_status s) {
  if (s == proxy_status::aborted) return "no completion within SHOAL_WAIT_TIMEOUT";
  if (s == proxy_status::consumer_stopped) return "the proxy stopped at a failure, which this PE's log names";
  return to_string(s);
}
[[noreturn]] __device__ inline void proxy_trap(const device_handle& h, const char* call, int pe, proxy_status s) {
  proxy_trap(h, call, pe, proxy_failure(s));
}

// The channel for a call to unreachable `pe`; traps when this PE has no proxy (every PE was thought to
// be on this node, or the job was built without a network).
__device__ inline const proxy_channel& proxy_of(const device_handle& h, const char* call, int pe) {
  if (h.proxy == nullptr) {
    printf("shoal: PE %d: %s: PE %d is not load/store reachable and this job has no proxy transport\n", h.pe, call, pe);
    __trap();
  }
  return *h.proxy;
}

// The heap offset of symmetric `p`. Only heap objects have offsets that mean the same on every PE, so a
// registered buffer cannot be a remote target on another node.
__device__ inline std::uint64_t proxy_heap_offset(const device_handle& h, const void* p, const char* call, int pe) {
  auto* b = static_cast<const std::byte*>(p);
  if (b < h.heap_base || b - h.heap_base >= h.slot_stride)
    proxy_trap(h, call, pe, "only symmetric heap objects (not registered buffers) are reachable on another node");
  return std::uint64_t(b - h.heap_base);
}

// The local side of a put or get: its heap offset when `p` is in this PE's heap, else its address, marked
// as host memory when `on_host` (the host forms say so; kernels pass device memory). The proxy copies
// from or to that address later, so it must be global memory: a kernel's __shared__ or local (stack)
// buffer has an address that means nothing outside its SM, and traps here (always: this path is the
// proxy's, where the check costs nothing against the request).
__device__ inline void proxy_set_local(const device_handle& h, proxy_request& r, const void* p, bool on_host,
                                       const char* call) {
  if (!on_host && !__isGlobal(p))
    proxy_trap(h, call, r.pe,
               "the local buffer is __shared__ or local (stack) memory, which the proxy cannot reach; pass global "
               "device memory (puts of at most 8 bytes excepted: they travel in the request)");
  auto* b = static_cast<const std::byte*>(p);
  r.local_is_address = !(b >= h.heap_base && b - h.heap_base < h.slot_stride);
  r.local = r.local_is_address ? reinterpret_cast<std::uintptr_t>(p) : std::uint64_t(b - h.heap_base);
  r.local_is_host = on_host && r.local_is_address;
}

// Whether a kernel's put of `bytes` through the proxy reads its source when it is posted (the data travels
// in the descriptor), so nothing need wait for it to complete before the source is reused.
__host__ __device__ constexpr bool proxy_put_reads_source_when_posted(std::size_t bytes) {
  return bytes <= kProxyMaxInlineBytes;
}

// The source of a put or put_signal: at most kProxyMaxInlineBytes of device memory travel in the
// descriptor itself (read here, so the proxy need not copy them out of the GPU first); anything else is
// named by proxy_set_local.
__device__ inline void proxy_set_put_source(const device_handle& h, proxy_request& r, const void* src,
                                            std::size_t bytes, bool on_host, const char* call) {
  if (on_host || !proxy_put_reads_source_when_posted(bytes)) return proxy_set_local(h, r, src, on_host, call);
  const auto* b = static_cast<const unsigned char*>(src);
  std::uint64_t data = 0;
  if (bytes == 8 && reinterpret_cast<std::uintptr_t>(src) % 8 == 0) {
    data = *static_cast<const std::uint64_t*>(src);
  } else {
    for (std::size_t i = 0; i < bytes; ++i) data |= std::uint64_t(b[i]) << (8 * i);
  }
  r.local_is_inline = true;
  r.local = data;
}

__device__ inline std::uint64_t proxy_submit(const device_handle& h, const proxy_request& r, const char* call) {
  const proxy_ticket t = proxy_post(proxy_of(h, call, r.pe).ring, r, proxy_deadline(h));
  if (t.status != proxy_status::ok) proxy_trap(h, call, r.pe, t.status);
  return t.sequence;
}

__device__ inline void proxy_await(const device_handle& h, std::uint64_t sequence, const char* call, int pe) {
  const proxy_status s = proxy_wait_complete(h.proxy->ring, sequence, proxy_deadline(h));
  if (s != proxy_status::ok) proxy_trap(h, call, pe, s);
}

// Every request this PE posted before the call is complete. Nothing to do without a proxy.
__device__ inline void proxy_quiet(const device_handle& h) {
  if (h.proxy == nullptr) return;
  const proxy_ring_view& ring = h.proxy->ring;
  const std::uint64_t issued = proxy_issued(ring);
  if (proxy_complete_before(ring, issued)) return;
  const proxy_status s = proxy_wait_complete_before(ring, issued, proxy_deadline(h));
  if (s == proxy_status::ok) return;
  // The tickets let the report be matched with the proxy's own ("in flight at the failure", in its log).
  printf(
      "shoal: PE %d: quiet through the proxy failed: %s (it waited for every request before %llu; those "
      "before %llu are complete)\n",
      h.pe, proxy_failure(s), static_cast<unsigned long long>(issued),
      static_cast<unsigned long long>(proxy_atomic::load_acquire(ring.control->completed)));
  __trap();
}

// ---- puts, gets, signals: posted by one thread ----

__device__ inline std::uint64_t proxy_transfer(const device_handle& h, proxy_op op, void* remote, void* local,
                                               std::size_t bytes, int pe, const char* call,
                                               bool local_on_host = false) {
  proxy_request r{};
  r.op = op;
  r.pe = pe;
  r.remote_offset = proxy_heap_offset(h, remote, call, pe);
  if (op == proxy_op::put)
    proxy_set_put_source(h, r, local, bytes, local_on_host, call);
  else
    proxy_set_local(h, r, local, local_on_host, call);
  r.size = bytes;
  return proxy_submit(h, r, call);
}

__device__ inline std::uint64_t proxy_put_signal(const device_handle& h, void* dst, const void* src, std::size_t bytes,
                                                 std::uint64_t* sig, std::uint64_t value, sig_op op, int pe,
                                                 bool local_on_host = false) {
  const char* call = "put_signal";
  proxy_request r{};
  r.op = proxy_op::put_signal;
  r.pe = pe;
  r.size = bytes;
  if (bytes != 0) {
    r.remote_offset = proxy_heap_offset(h, dst, call, pe);
    proxy_set_put_source(h, r, src, bytes, local_on_host, call);
  }
  r.signal_op = op == sig_op::set ? proxy_signal_op::set : proxy_signal_op::add;
  r.signal_offset = proxy_heap_offset(h, sig, call, pe);
  r.value = value;
  return proxy_submit(h, r, call);
}

__device__ inline void proxy_signal(const device_handle& h, std::uint64_t* sig, std::uint64_t value, sig_op op,
                                    int pe) {
  proxy_request r{};
  r.op = proxy_op::signal;
  r.pe = pe;
  r.signal_op = op == sig_op::set ? proxy_signal_op::set : proxy_signal_op::add;
  r.signal_offset = proxy_heap_offset(h, sig, "signal_op", pe);
  r.value = value;
  proxy_submit(h, r, "signal_op");
}

// The part of a scope-wide put or get that the calling thread posts: everything for the scope's leader,
// the CTA's slice for each CTA's leader at grid scope (as the load/store form splits the copy), nothing
// for the other threads. Returns false when the caller posts nothing.
template <typename Scope>
__device__ inline bool proxy_share(std::size_t bytes, std::size_t& begin, std::size_t& end) {
  if constexpr (std::is_same_v<Scope, grid_scope>) {
    if (!block_scope::leader()) return false;
    const std::size_t blocks = grid_scope::n_blocks();
    const std::size_t per = ((bytes + blocks - 1) / blocks + 15) / 16 * 16;  // > 0 whenever bytes > 0
    begin = per * grid_scope::block_rank();
    begin = begin < bytes ? begin : bytes;
    end = bytes - begin < per ? bytes : begin + per;
    return true;
  } else {
    begin = 0;
    end = bytes;
    return Scope::leader();
  }
}

// ---- atomics ----

// Result slots are lent to one thread from posting a fetching atomic until it has read the old value.
__device__ inline std::uint32_t proxy_take_result_slot(const device_handle& h) {
  const proxy_channel& c = *h.proxy;
  const std::uint32_t words = c.ring.result_slots / 32;
  std::uint32_t w = (grid_scope::block_rank() * 32 + block_scope::rank() / 32) % words;
  const proxy_device_deadline deadline = proxy_deadline(h);
  for (std::uint64_t polls = 0;; ++polls, w = (w + 1) % words) {
    std::uint32_t bits = *static_cast<volatile std::uint32_t*>(c.result_owners + w);
    while (bits != ~0u) {
      const std::uint32_t bit = 1u << (__ffs(int(~bits)) - 1);
      const std::uint32_t before = atomicOr(c.result_owners + w, bit);
      if ((before & bit) == 0) return w * 32 + (__ffs(int(bit)) - 1);
      bits = before | bit;
    }
    if (deadline(polls)) proxy_trap(h, "atomic", -1, "no free result slot within SHOAL_WAIT_TIMEOUT");
  }
}

__device__ inline void proxy_return_result_slot(const device_handle& h, std::uint32_t slot) {
  __threadfence();  // the old value was read before the slot can be reused
  atomicAnd(h.proxy->result_owners + slot / 32, ~(1u << (slot % 32)));
}

// One atomic on the `width`-byte heap word `target` of `pe`, operands as bit patterns (32-bit in the low
// half); `is_float` for float and double (fetch, set, swap and the adds). Returns the old value for fetching ops, after
// waiting for it; non-fetching ones complete at quiet.
__device__ inline std::uint64_t proxy_atomic_bits(const device_handle& h, const void* target, unsigned width,
                                                  bool is_float, proxy_atomic_op op, std::uint64_t value,
                                                  std::uint64_t compare, int pe) {
  const char* call = "atomic";
  proxy_request r{};
  r.op = proxy_op::atomic;
  r.atomic_op = op;
  r.atomic_type = width == 4 ? (is_float ? proxy_atomic_type::float32 : proxy_atomic_type::int32)
                             : (is_float ? proxy_atomic_type::float64 : proxy_atomic_type::int64);
  r.pe = pe;
  r.remote_offset = proxy_heap_offset(h, target, call, pe);
  r.value = proxy_atomic_has_operand(op) ? value : 0;
  r.compare = op == proxy_atomic_op::compare_swap ? compare : 0;
  if (!proxy_atomic_fetches(op)) {
    proxy_submit(h, r, call);
    return 0;
  }
  proxy_of(h, call, pe);
  r.completion = proxy_take_result_slot(h);
  proxy_await(h, proxy_submit(h, r, call), call, pe);
  const std::uint64_t old = proxy_result(h.proxy->ring, r.completion);
  proxy_return_result_slot(h, r.completion);
  return old;
}

template <typename T>
__device__ inline std::uint64_t proxy_bits_of(T v) {
  std::uint64_t bits = 0;
  memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T>
__device__ inline T proxy_value_of(std::uint64_t bits) {
  T v;
  memcpy(&v, &bits, sizeof(T));
  return v;
}

// An atomic on a 4- or 8-byte T; floating-point types are marked so the target adds them as floats.
template <typename T>
__device__ inline T proxy_amo(const device_handle& h, T* target, proxy_atomic_op op, T value, T compare, int pe) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics are 32 or 64 bits");
  return proxy_value_of<T>(proxy_atomic_bits(h, target, sizeof(T), std::is_floating_point_v<T>, op,
                                             proxy_bits_of(value), proxy_bits_of(compare), pe));
}

// ---- p and g ----

// p: a 4- or 8-byte value is an atomic set; a 1- or 2-byte one is merged into its aligned 32-bit word
// with compare-and-swap (no other byte of the word changes).
template <typename T>
__device__ inline void proxy_p(const device_handle& h, T* dst, T value, int pe) {
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    proxy_atomic_bits(h, dst, sizeof(T), false, proxy_atomic_op::set, proxy_bits_of(value), 0, pe);
  } else if constexpr (sizeof(T) == 1 || sizeof(T) == 2) {
    auto* word = reinterpret_cast<std::uint32_t*>(reinterpret_cast<std::uintptr_t>(dst) & ~std::uintptr_t{3});
    const unsigned shift = 8 * unsigned(reinterpret_cast<std::uintptr_t>(dst) & 3);
    const std::uint32_t mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    const std::uint32_t bits = std::uint32_t(proxy_bits_of(value)) << shift;
    std::uint64_t old = proxy_atomic_bits(h, word, 4, false, proxy_atomic_op::fetch, 0, 0, pe);
    for (;;) {
      const std::uint64_t want = (old & ~std::uint64_t{mask}) | bits;
      const std::uint64_t seen = proxy_atomic_bits(h, word, 4, false, proxy_atomic_op::compare_swap, want, old, pe);
      if (seen == old) return;
      old = seen;
    }
  } else {
    proxy_trap(h, "p", pe, "p to another node takes 1-, 2-, 4- or 8-byte types");
  }
}

// g: an atomic fetch of the value, or of the aligned 32-bit word holding a 1- or 2-byte value.
template <typename T>
__device__ inline T proxy_g(const device_handle& h, const T* src, int pe) {
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    return proxy_value_of<T>(proxy_atomic_bits(h, src, sizeof(T), false, proxy_atomic_op::fetch, 0, 0, pe));
  } else if constexpr (sizeof(T) == 1 || sizeof(T) == 2) {
    const auto address = reinterpret_cast<std::uintptr_t>(src);
    const std::uint64_t word = proxy_atomic_bits(h, reinterpret_cast<const void*>(address & ~std::uintptr_t{3}), 4,
                                                 false, proxy_atomic_op::fetch, 0, 0, pe);
    return proxy_value_of<T>(word >> (8 * (address & 3)));
  } else {
    proxy_trap(h, "g", pe, "g from another node takes 1-, 2-, 4- or 8-byte types");
  }
}

}  // namespace shoal::detail
