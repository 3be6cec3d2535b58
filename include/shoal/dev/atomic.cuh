// Remote atomics on symmetric objects, one thread each, atomic at system scope with respect to every
// other shoal atomic on the same object from any PE (and the host forms). Relaxed: order them against
// other operations with fence()/quiet(), as OpenSHMEM does.
// Integer forms take 32- and 64-bit integers; float and double take fetch, set, swap, add and fetch_add.
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
template <typename T>
__device__ inline cuda::atomic_ref<T, cuda::thread_scope_system> remote_atomic(const device_handle& h, T* target,
                                                                               int pe) {
  SHOAL_CHECK_SYMMETRIC(h, target, sizeof(T));
  return cuda::atomic_ref<T, cuda::thread_scope_system>(*remote(h, target, pe));
}
constexpr auto kRelaxed = cuda::memory_order_relaxed;
}  // namespace detail

template <atomic_arithmetic T>
__device__ inline T atomic_fetch(const device_handle& h, const T* target, int pe) {
  return detail::remote_atomic(h, const_cast<T*>(target), pe).load(detail::kRelaxed);
}
template <atomic_arithmetic T>
__device__ inline void atomic_set(const device_handle& h, T* target, T value, int pe) {
  detail::remote_atomic(h, target, pe).store(value, detail::kRelaxed);
}
template <atomic_arithmetic T>
__device__ inline T atomic_swap(const device_handle& h, T* target, T value, int pe) {
  return detail::remote_atomic(h, target, pe).exchange(value, detail::kRelaxed);
}
// Stores `value` if the target equals `cond`; returns the target's previous value either way.
template <atomic_integer T>
__device__ inline T atomic_compare_swap(const device_handle& h, T* target, T cond, T value, int pe) {
  detail::remote_atomic(h, target, pe).compare_exchange_strong(cond, value, detail::kRelaxed);
  return cond;
}
template <atomic_arithmetic T>
__device__ inline T atomic_fetch_add(const device_handle& h, T* target, T value, int pe) {
  return detail::remote_atomic(h, target, pe).fetch_add(value, detail::kRelaxed);
}
template <atomic_arithmetic T>
__device__ inline void atomic_add(const device_handle& h, T* target, T value, int pe) {
  detail::remote_atomic(h, target, pe).fetch_add(value, detail::kRelaxed);
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
  return detail::remote_atomic(h, target, pe).fetch_and(value, detail::kRelaxed);
}
template <atomic_integer T>
__device__ inline void atomic_and(const device_handle& h, T* target, T value, int pe) {
  atomic_fetch_and(h, target, value, pe);
}
template <atomic_integer T>
__device__ inline T atomic_fetch_or(const device_handle& h, T* target, T value, int pe) {
  return detail::remote_atomic(h, target, pe).fetch_or(value, detail::kRelaxed);
}
template <atomic_integer T>
__device__ inline void atomic_or(const device_handle& h, T* target, T value, int pe) {
  atomic_fetch_or(h, target, value, pe);
}
template <atomic_integer T>
__device__ inline T atomic_fetch_xor(const device_handle& h, T* target, T value, int pe) {
  return detail::remote_atomic(h, target, pe).fetch_xor(value, detail::kRelaxed);
}
template <atomic_integer T>
__device__ inline void atomic_xor(const device_handle& h, T* target, T value, int pe) {
  atomic_fetch_xor(h, target, value, pe);
}

}  // namespace shoal
