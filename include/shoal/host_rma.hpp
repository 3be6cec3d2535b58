// Host-initiated RMA and atomics on symmetric objects, blocking: each call has completed (the data or
// the update is visible at the target) when it returns, except atomic_set to a PE on another node, which
// the proxy completes by quiet() or barrier_all() (the other atomics fetch, so they wait). Within a node data moves
// with the GPU's copy engines (p and g too); atomics launch a one-thread kernel on the world's internal stream. For
// calls ordered with your own GPU work, use the *_on_stream forms of shoal/stream.hpp instead.
// Errors (PE out of range, address outside the heap, unreachable PE, a null local buffer with bytes to move, a
// put or get to this PE whose ranges partly overlap) throw shoal::error naming the call. So does a local buffer in
// device memory that is shorter than the copy (errc::invalid_argument): refused before anything moves when its
// last byte lies in no CUDA allocation; when that byte lies in another allocation, CUDA refuses the copy
// within a node (pinned host memory alike), while to another node the proxy thread makes the copy, unchecked.
// A call of 0 bytes may pass null pointers. Calls may come from several host threads of one PE (each with
// the PE's device current): they share the world's internal stream, and the atomics take turns on their one
// result slot.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shoal/world.hpp"

namespace shoal {

// Copies `bytes` from local `src` (host or device memory) to symmetric `dst` on `pe`.
void put(world& w, void* dst, const void* src, std::size_t bytes, int pe);
// Copies `bytes` from symmetric `src` on `pe` to local `dst` (host or device memory).
void get(world& w, void* dst, const void* src, std::size_t bytes, int pe);

template <typename T>
void p(world& w, T* dst, T value, int pe) {
  put(w, dst, &value, sizeof(T), pe);
}
template <typename T>
T g(world& w, const T* src, int pe) {
  T value;
  get(w, &value, src, sizeof(T), pe);
  return value;
}

// Drains the world's internal stream and, when the job spans nodes, waits for the proxy to complete what it
// had only posted (atomic_set to other nodes).
void quiet(world& w);

// Every PE's host reaches the barrier; on return every PE's host-initiated RMA before it is complete.
// Device work is not waited for: use barrier_all_on_stream to order with kernels. Where one PE's share fails
// (a CUDA error), every PE throws, the others naming that PE.
void barrier_all(world& w);

// ---- atomics: the same semantics as the device forms (shoal/dev/atomic.cuh), on 32/64-bit integers,
// and fetch/set/swap/fetch_add/add on float and double.
template <typename T>
concept host_atomic_integer = std::is_integral_v<T> &&(sizeof(T) == 4 || sizeof(T) == 8);
template <typename T>
concept host_atomic_arithmetic = host_atomic_integer<T> || std::is_same_v<T, float> || std::is_same_v<T, double>;

enum class atomic_kind { fetch, set, swap, compare_swap, fetch_add, fetch_and, fetch_or, fetch_xor };

// The one entry point behind the named forms below; returns the target's previous value.
template <host_atomic_arithmetic T>
T host_atomic(world& w, atomic_kind kind, T* target, T operand, T cond, int pe);

template <host_atomic_arithmetic T>
T atomic_fetch(world& w, const T* target, int pe) {
  return host_atomic(w, atomic_kind::fetch, const_cast<T*>(target), T{}, T{}, pe);
}
template <host_atomic_arithmetic T>
void atomic_set(world& w, T* target, T value, int pe) {
  host_atomic(w, atomic_kind::set, target, value, T{}, pe);
}
template <host_atomic_arithmetic T>
T atomic_swap(world& w, T* target, T value, int pe) {
  return host_atomic(w, atomic_kind::swap, target, value, T{}, pe);
}
template <host_atomic_integer T>
T atomic_compare_swap(world& w, T* target, T cond, T value, int pe) {
  return host_atomic(w, atomic_kind::compare_swap, target, value, cond, pe);
}
template <host_atomic_arithmetic T>
T atomic_fetch_add(world& w, T* target, T value, int pe) {
  return host_atomic(w, atomic_kind::fetch_add, target, value, T{}, pe);
}
template <host_atomic_arithmetic T>
void atomic_add(world& w, T* target, T value, int pe) {
  host_atomic(w, atomic_kind::fetch_add, target, value, T{}, pe);
}
template <host_atomic_integer T>
T atomic_fetch_inc(world& w, T* target, int pe) {
  return host_atomic(w, atomic_kind::fetch_add, target, T{1}, T{}, pe);
}
template <host_atomic_integer T>
void atomic_inc(world& w, T* target, int pe) {
  host_atomic(w, atomic_kind::fetch_add, target, T{1}, T{}, pe);
}
template <host_atomic_integer T>
T atomic_fetch_and(world& w, T* target, T value, int pe) {
  return host_atomic(w, atomic_kind::fetch_and, target, value, T{}, pe);
}
template <host_atomic_integer T>
void atomic_and(world& w, T* target, T value, int pe) {
  host_atomic(w, atomic_kind::fetch_and, target, value, T{}, pe);
}
template <host_atomic_integer T>
T atomic_fetch_or(world& w, T* target, T value, int pe) {
  return host_atomic(w, atomic_kind::fetch_or, target, value, T{}, pe);
}
template <host_atomic_integer T>
void atomic_or(world& w, T* target, T value, int pe) {
  host_atomic(w, atomic_kind::fetch_or, target, value, T{}, pe);
}
template <host_atomic_integer T>
T atomic_fetch_xor(world& w, T* target, T value, int pe) {
  return host_atomic(w, atomic_kind::fetch_xor, target, value, T{}, pe);
}
template <host_atomic_integer T>
void atomic_xor(world& w, T* target, T value, int pe) {
  host_atomic(w, atomic_kind::fetch_xor, target, value, T{}, pe);
}

}  // namespace shoal
