// Signals: 64-bit words in the symmetric heap that a remote PE sets or adds to, usually right after
// delivering data (put_signal), and that the owner waits on (signal_wait_until).
#pragma once

#include <cuda/atomic>

#include <cstdint>

#include "shoal/dev/rma.cuh"
#include "shoal/dev/wait.cuh"

namespace shoal {

namespace detail {
__device__ inline void update_signal(std::uint64_t* remote_sig, std::uint64_t value, sig_op op,
                                     cuda::memory_order order) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> word(*remote_sig);
  if (op == sig_op::set)
    word.store(value, order);
  else
    word.fetch_add(value, order);
}
}  // namespace detail

// Sets or adds to signal `*sig` on `pe` (one thread). Atomic, unordered with the caller's earlier puts
// unless a fence() comes between (as OpenSHMEM signal_op).
__device__ inline void signal_op(const device_handle& h, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe) {
  SHOAL_CHECK_ATOMIC_TARGET(h, sig, sizeof(std::uint64_t));
  if (std::uint64_t* to = ptr(h, sig, pe))
    detail::update_signal(to, value, op, cuda::memory_order_relaxed);
  else
    detail::proxy_signal(h, sig, value, op, pe);
}

namespace detail {
// put_signal by load/store: the scope's threads share the copy, then one thread updates the signal with
// release order after the scope has met (release at system scope is cumulative: the scope barrier
// orders every thread's stores before it). Through the proxy: the leader's (at grid scope each CTA
// leader's) share goes as one put_signal request, which the proxy applies data first, signal second;
// with `wait` the poster waits for it. At grid scope each CTA signals for its own share: the receiver
// waits for n_blocks updates (use add).
template <typename Scope>
__device__ inline void put_signal_bytes(Scope scope, const device_handle& h, void* dst, const void* src,
                                        std::size_t bytes, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe,
                                        bool wait) {
  SHOAL_CHECK_ATOMIC_TARGET(h, sig, sizeof(std::uint64_t));
  SHOAL_CHECK_SYMMETRIC(h, dst, bytes);
  const bool signals = std::is_same_v<Scope, grid_scope> ? block_scope::leader() : Scope::leader();
  if (std::uint64_t* remote_sig = ptr(h, sig, pe)) {
    scope_copy(scope, remote(h, dst, pe), src, bytes);
    Scope::sync();
    if (signals) update_signal(remote_sig, value, op, cuda::memory_order_release);
    return;
  }
  std::size_t begin, end;
  if (!proxy_share<Scope>(bytes, begin, end)) return;
  const std::uint64_t ticket =
      proxy_put_signal(h, static_cast<std::byte*>(dst) + begin, static_cast<const std::byte*>(src) + begin, end - begin,
                       sig, value, op, pe);
  if (wait) proxy_await(h, ticket, "put_signal", pe);
}
}  // namespace detail

// put, then update the signal on `pe` (the _nbi form): a PE that sees the signal change also sees all
// `bytes` of data. The source may be reused after quiet(); over load/store transports the copy is done
// on return already. At grid scope each CTA signals for its own share: the receiver waits for n_blocks
// updates (use add).
template <typename Scope>
__device__ inline void put_signal_bytes_nbi(Scope scope, const device_handle& h, void* dst, const void* src,
                                            std::size_t bytes, std::uint64_t* sig, std::uint64_t value, sig_op op,
                                            int pe) {
  detail::put_signal_bytes(scope, h, dst, src, bytes, sig, value, op, pe, false);
}

// The blocking form: on return any thread of the scope may reuse the source.
template <typename Scope>
__device__ inline void put_signal_bytes(Scope scope, const device_handle& h, void* dst, const void* src,
                                        std::size_t bytes, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe) {
  detail::put_signal_bytes(scope, h, dst, src, bytes, sig, value, op, pe, true);
  Scope::sync();
}

template <typename Scope, typename T>
__device__ inline void put_signal(Scope scope, const device_handle& h, T* dst, const T* src, std::size_t count,
                                  std::uint64_t* sig, std::uint64_t value, sig_op op, int pe) {
  put_signal_bytes(scope, h, dst, src, detail::typed_bytes<T>(h, count), sig, value, op, pe);
}

template <typename Scope, typename T>
__device__ inline void put_signal_nbi(Scope scope, const device_handle& h, T* dst, const T* src, std::size_t count,
                                      std::uint64_t* sig, std::uint64_t value, sig_op op, int pe) {
  put_signal_bytes_nbi(scope, h, dst, src, detail::typed_bytes<T>(h, count), sig, value, op, pe);
}

// The current value of the caller's own signal word (acquire).
__device__ inline std::uint64_t signal_fetch(const device_handle&, const std::uint64_t* sig) {
  return detail::load_acquire(sig);
}

// Waits until the caller's own signal compares true against `value`; returns the value seen.
__device__ inline std::uint64_t signal_wait_until(const device_handle& h, const std::uint64_t* sig, cmp op,
                                                  std::uint64_t value) {
  return wait_until(h, sig, op, value);
}

template <typename Scope>
__device__ inline std::uint64_t signal_wait_until(Scope scope, const device_handle& h, const std::uint64_t* sig, cmp op,
                                                  std::uint64_t value) {
  return wait_until(scope, h, sig, op, value);
}

__device__ inline wait_status signal_wait_until_for(const device_handle& h, const std::uint64_t* sig, cmp op,
                                                    std::uint64_t value, std::uint64_t timeout_ns) {
  return wait_until_for(h, sig, op, value, timeout_ns);
}

}  // namespace shoal
