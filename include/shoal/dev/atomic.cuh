// Remote atomics on symmetric objects, one thread each, atomic at system scope with respect to every
// other shoal atomic on the same object from any PE (and the host forms). Relaxed: order them against
// other operations with fence()/quiet(), as OpenSHMEM does.
// Integer forms take 32- and 64-bit integers; float and double take fetch, set, swap, add and fetch_add.
// To a PE on another node each goes through the proxy (dev/detail/proxy.cuh): non-fetching forms return
// once posted and are complete after quiet(); fetching forms wait for the old value.
#pragma once

#include <cuda/atomic>

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "shoal/dev/rma.cuh"

namespace shoal {

template <typename T>
concept atomic_integer = std::is_integral_v<T> &&(sizeof(T) == 4 || sizeof(T) == 8);
template <typename T>
concept atomic_arithmetic = atomic_integer<T> || std::is_same_v<T, float> || std::is_same_v<T, double>;

namespace detail {
constexpr auto kRelaxed = cuda::memory_order_relaxed;
using amo = proxy_atomic_op;

// One atomic on `target` at `pe`: `direct` on a system-scope atomic_ref when the PE is mapped here, else
// the proxy's form of `op` (dev/detail/proxy.cuh).
template <typename T, typename Direct>
__device__ inline T apply_atomic(const device_handle& h, T* target, int pe, amo op, T value, T compare, Direct direct) {
  SHOAL_CHECK_ATOMIC_TARGET(h, target, sizeof(T));
  if (T* to = ptr(h, target, pe)) return direct(cuda::atomic_ref<T, cuda::thread_scope_system>(*to));
  return proxy_amo(h, target, op, value, compare, pe);
}
}  // namespace detail

template <atomic_arithmetic T>
__device__ inline T atomic_fetch(const device_handle& h, const T* target, int pe) {
  return detail::apply_atomic(h, const_cast<T*>(target), pe, detail::amo::fetch, T{}, T{},
                              [](auto a) { return a.load(detail::kRelaxed); });
}
template <atomic_arithmetic T>
__device__ inline void atomic_set(const device_handle& h, T* target, T value, int pe) {
  detail::apply_atomic(h, target, pe, detail::amo::set, value, T{}, [=](auto a) {
    a.store(value, detail::kRelaxed);
    return T{};
  });
}
template <atomic_arithmetic T>
__device__ inline T atomic_swap(const device_handle& h, T* target, T value, int pe) {
  return detail::apply_atomic(h, target, pe, detail::amo::swap, value, T{},
                              [=](auto a) { return a.exchange(value, detail::kRelaxed); });
}
// Stores `value` if the target equals `cond`; returns the target's previous value either way.
template <atomic_integer T>
__device__ inline T atomic_compare_swap(const device_handle& h, T* target, T cond, T value, int pe) {
  return detail::apply_atomic(h, target, pe, detail::amo::compare_swap, value, cond, [=](auto a) {
    T expected = cond;
    a.compare_exchange_strong(expected, value, detail::kRelaxed);
    return expected;
  });
}
template <atomic_arithmetic T>
__device__ inline T atomic_fetch_add(const device_handle& h, T* target, T value, int pe) {
  return detail::apply_atomic(h, target, pe, detail::amo::fetch_add, value, T{},
                              [=](auto a) { return a.fetch_add(value, detail::kRelaxed); });
}
template <atomic_arithmetic T>
__device__ inline void atomic_add(const device_handle& h, T* target, T value, int pe) {
  detail::apply_atomic(h, target, pe, detail::amo::add, value, T{},
                       [=](auto a) { return a.fetch_add(value, detail::kRelaxed); });
}
template <atomic_integer T>
__device__ inline T atomic_fetch_inc(const device_handle& h, T* target, int pe) {
  return atomic_fetch_add(h, target, T{1}, pe);
}
template <atomic_integer T>
__device__ inline void atomic_inc(const device_handle& h, T* target, int pe) {
  atomic_add(h, target, T{1}, pe);
}
template <atomic_integer T>
__device__ inline T atomic_fetch_and(const device_handle& h, T* target, T value, int pe) {
  return detail::apply_atomic(h, target, pe, detail::amo::fetch_and, value, T{},
                              [=](auto a) { return a.fetch_and(value, detail::kRelaxed); });
}
template <atomic_integer T>
__device__ inline void atomic_and(const device_handle& h, T* target, T value, int pe) {
  detail::apply_atomic(h, target, pe, detail::amo::bit_and, value, T{},
                       [=](auto a) { return a.fetch_and(value, detail::kRelaxed); });
}
template <atomic_integer T>
__device__ inline T atomic_fetch_or(const device_handle& h, T* target, T value, int pe) {
  return detail::apply_atomic(h, target, pe, detail::amo::fetch_or, value, T{},
                              [=](auto a) { return a.fetch_or(value, detail::kRelaxed); });
}
template <atomic_integer T>
__device__ inline void atomic_or(const device_handle& h, T* target, T value, int pe) {
  detail::apply_atomic(h, target, pe, detail::amo::bit_or, value, T{},
                       [=](auto a) { return a.fetch_or(value, detail::kRelaxed); });
}
template <atomic_integer T>
__device__ inline T atomic_fetch_xor(const device_handle& h, T* target, T value, int pe) {
  return detail::apply_atomic(h, target, pe, detail::amo::fetch_xor, value, T{},
                              [=](auto a) { return a.fetch_xor(value, detail::kRelaxed); });
}
template <atomic_integer T>
__device__ inline void atomic_xor(const device_handle& h, T* target, T value, int pe) {
  detail::apply_atomic(h, target, pe, detail::amo::bit_xor, value, T{},
                       [=](auto a) { return a.fetch_xor(value, detail::kRelaxed); });
}

}  // namespace shoal
