// Point-to-point synchronization on the caller's own symmetric memory: wait_until and test, single and
// vector forms (all / any / some). A remote PE changes the word with p, put, put_signal or an atomic.
// Waits use acquire loads at system scope: once a wait returns, data written by the remote PE before it
// released that word (put_signal, or fence/quiet then the update) is visible to the scope's threads.
// Each blocking wait traps after SHOAL_WAIT_TIMEOUT, printing what it waited for; the *_for forms take
// their own timeout and return wait_status::timed_out instead.
#pragma once

#include <cuda/atomic>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shoal/dev/detail/spin.cuh"
#include "shoal/dev/scope.cuh"
#include "shoal/device_handle.hpp"
#include "shoal/types.hpp"

namespace shoal {

namespace detail {

template <typename T>
__device__ inline bool compare(T value, cmp op, T operand) {
  switch (op) {
    case cmp::eq:
      return value == operand;
    case cmp::ne:
      return value != operand;
    case cmp::gt:
      return value > operand;
    case cmp::ge:
      return value >= operand;
    case cmp::lt:
      return value < operand;
    case cmp::le:
      return value <= operand;
  }
  return false;
}

__device__ inline const char* to_string(cmp op) {
  switch (op) {
    case cmp::eq:
      return "==";
    case cmp::ne:
      return "!=";
    case cmp::gt:
      return ">";
    case cmp::ge:
      return ">=";
    case cmp::lt:
      return "<";
    case cmp::le:
      return "<=";
  }
  return "?";
}

template <typename T>
__device__ inline T load_acquire(const T* p) {
  return cuda::atomic_ref<T, cuda::thread_scope_system>(*const_cast<T*>(p)).load(cuda::memory_order_acquire);
}

template <typename T>
__device__ inline T load_relaxed(const T* p) {
  return cuda::atomic_ref<T, cuda::thread_scope_system>(*const_cast<T*>(p)).load(cuda::memory_order_relaxed);
}

// Keeps the compiler from using `value` (e.g. a loaded word) before this point: the load it came from
// can then stay in flight under whatever the code before this point waits for, such as a fence.
template <typename T>
__device__ inline void use_after_here(T& value) {
  static_assert(sizeof(T) == 8, "a 64-bit value");
  asm volatile("" : "+l"(value)::"memory");
}

// Polls with acquire loads until pred(value) holds. (Relaxed polling followed by one acquire fence was
// measured slower: the system-scope fence costs more than acquire on every poll; see docs/perf-notes.md.)
template <typename T, typename Pred>
__device__ inline bool poll_acquire(const T* p, T& seen, Pred pred, std::uint64_t timeout_ns) {
  return spin_until([&] { return pred(seen = load_acquire(p)); }, timeout_ns);
}

// The leader waits, then the scope meets and shares the leader's result: the acquire plus the scope
// barrier make the awaited data visible to every thread of the scope. Waits take thread, warp or block
// scope (a grid waits per CTA: call the block form).
template <typename Scope, typename Body>
__device__ inline auto leader_then_sync(Body body) {
  static_assert(!std::is_same_v<Scope, grid_scope>, "waits are made at thread, warp or block scope");
  using R = decltype(body());
  static_assert(sizeof(R) <= 8 && std::is_trivially_copyable_v<R>);
  R result{};
  if (Scope::leader()) result = body();
  if constexpr (std::is_same_v<Scope, warp_scope>) {
    unsigned long long bits = 0;
    memcpy(&bits, &result, sizeof(R));
    bits = __shfl_sync(0xffffffffu, bits, 0);
    memcpy(&result, &bits, sizeof(R));
    __syncwarp();  // a shuffle orders no memory: the warp barrier passes the leader's acquire to the lanes
  } else if constexpr (std::is_same_v<Scope, block_scope>) {
    __shared__ unsigned long long slot;
    if (Scope::leader()) memcpy(&slot, &result, sizeof(R));
    __syncthreads();
    memcpy(&result, &slot, sizeof(R));
    __syncthreads();
  }
  return result;
}

}  // namespace detail

// ---- single word --------------------------------------------------------------------------------------

// Returns once `*ivar` (local, symmetric) compares true against `value`; returns the value seen.
template <typename T>
__device__ inline T wait_until(const device_handle& h, const T* ivar, cmp op, T value) {
  T seen{};
  bool ok = detail::poll_acquire(
      ivar, seen, [&](T v) { return detail::compare(v, op, value); }, h.wait_timeout_ns);
  if (!ok) detail::report_wait_timeout(h, "wait_until", ivar, seen, detail::to_string(op), value);
  return seen;
}

template <typename T>
__device__ inline wait_status wait_until_for(const device_handle&, const T* ivar, cmp op, T value,
                                             std::uint64_t timeout_ns) {
  T seen{};
  bool ok = detail::poll_acquire(
      ivar, seen, [&](T v) { return detail::compare(v, op, value); }, timeout_ns == 0 ? 1 : timeout_ns);
  return ok ? wait_status::ok : wait_status::timed_out;
}

template <typename Scope, typename T>
__device__ inline T wait_until(Scope, const device_handle& h, const T* ivar, cmp op, T value) {
  return detail::leader_then_sync<Scope>([&] { return wait_until(h, ivar, op, value); });
}

template <typename T>
__device__ inline bool test(const device_handle&, const T* ivar, cmp op, T value) {
  return detail::compare(detail::load_acquire(ivar), op, value);
}

// ---- vectors: `n` words at ivars[0..n); `status` (may be null) masks out entries whose status is
// non-zero. The *_vector forms compare word i against values[i]. -------------------------------------

namespace detail {
// Waits for each unmasked word in turn to compare true against value_of(i), within one timeout for the
// whole vector (a vector whose words arrive just under the timeout apart still traps).
template <typename T, typename ValueOf>
__device__ inline void wait_until_each(const device_handle& h, const char* what, const T* ivars, std::size_t n,
                                       const int* status, cmp op, ValueOf value_of) {
  const std::uint64_t start = global_timer_ns();
  for (std::size_t i = 0; i < n; ++i) {
    if (status != nullptr && status[i] != 0) continue;
    const T value = value_of(i);
    std::uint64_t left = 0;  // 0: no timeout
    if (h.wait_timeout_ns != 0) {
      const std::uint64_t spent = global_timer_ns() - start;
      left = spent < h.wait_timeout_ns ? h.wait_timeout_ns - spent : 1;
    }
    T seen{};
    if (!poll_acquire(
            ivars + i, seen, [&](T v) { return compare(v, op, value); }, left))
      report_wait_timeout(h, what, ivars + i, seen, to_string(op), value);
  }
}
}  // namespace detail

// Returns once every unmasked word compares true.
template <typename T>
__device__ inline void wait_until_all(const device_handle& h, const T* ivars, std::size_t n, const int* status, cmp op,
                                      T value) {
  detail::wait_until_each(h, "wait_until_all", ivars, n, status, op, [&](std::size_t) { return value; });
}

template <typename T>
__device__ inline void wait_until_all_vector(const device_handle& h, const T* ivars, std::size_t n, const int* status,
                                             cmp op, const T* values) {
  detail::wait_until_each(h, "wait_until_all_vector", ivars, n, status, op, [&](std::size_t i) { return values[i]; });
}

// Test forms: true (or the index / count) when satisfied now; never wait.
template <typename T>
__device__ inline bool test_all(const device_handle& h, const T* ivars, std::size_t n, const int* status, cmp op,
                                T value) {
  for (std::size_t i = 0; i < n; ++i)
    if ((status == nullptr || status[i] == 0) && !test(h, ivars + i, op, value)) return false;
  return true;
}

// Index of an unmasked word that compares true, or SIZE_MAX when none does (now).
template <typename T>
__device__ inline std::size_t test_any(const device_handle& h, const T* ivars, std::size_t n, const int* status, cmp op,
                                       T value) {
  for (std::size_t i = 0; i < n; ++i)
    if ((status == nullptr || status[i] == 0) && test(h, ivars + i, op, value)) return i;
  return SIZE_MAX;
}

// Writes the indices of all unmasked words that compare true now to `indices`; returns how many.
template <typename T>
__device__ inline std::size_t test_some(const device_handle& h, const T* ivars, std::size_t n, std::size_t* indices,
                                        const int* status, cmp op, T value) {
  std::size_t found = 0;
  for (std::size_t i = 0; i < n; ++i)
    if ((status == nullptr || status[i] == 0) && test(h, ivars + i, op, value)) indices[found++] = i;
  return found;
}

namespace detail {
__device__ inline bool any_unmasked(const int* status, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (status == nullptr || status[i] == 0) return true;
  return false;
}

// Spins until test_now() returns non-zero; past the timeout, reports the condition (the first word's last value
// stands for the vector's) and traps.
template <typename T, typename Test>
__device__ inline auto wait_for_test(const device_handle& h, const char* what, const T* ivars, cmp op, T value,
                                     Test test_now) {
  decltype(test_now()) result{};
  bool ok = spin_until([&] { return (result = test_now()) != decltype(result){}; }, h.wait_timeout_ns);
  if (!ok) report_wait_timeout(h, what, ivars, load_acquire(ivars), to_string(op), value);
  return result;
}
}  // namespace detail

// Returns the index of an unmasked word that compares true (SIZE_MAX if every word is masked).
template <typename T>
__device__ inline std::size_t wait_until_any(const device_handle& h, const T* ivars, std::size_t n, const int* status,
                                             cmp op, T value) {
  if (!detail::any_unmasked(status, n)) return SIZE_MAX;
  return detail::wait_for_test(h, "wait_until_any (any word of the vector; the first word's value shown)", ivars, op,
                               value, [&] { return test_any(h, ivars, n, status, op, value) + 1; }) -
         1;
}

// Waits until at least one unmasked word compares true; writes all that do to `indices`, returns how many
// (at least one, unless every word is masked). The count itself is what it waits on: a word that compared
// true once and changed again before a second look would otherwise leave none to report.
template <typename T>
__device__ inline std::size_t wait_until_some(const device_handle& h, const T* ivars, std::size_t n,
                                              std::size_t* indices, const int* status, cmp op, T value) {
  if (!detail::any_unmasked(status, n)) return 0;
  return detail::wait_for_test(h, "wait_until_some (any word of the vector; the first word's value shown)", ivars, op,
                               value, [&] { return test_some(h, ivars, n, indices, status, op, value); });
}

template <typename Scope, typename T>
__device__ inline void wait_until_all(Scope, const device_handle& h, const T* ivars, std::size_t n, const int* status,
                                      cmp op, T value) {
  detail::leader_then_sync<Scope>([&] {
    wait_until_all(h, ivars, n, status, op, value);
    return 0;
  });
}

template <typename Scope, typename T>
__device__ inline std::size_t wait_until_any(Scope, const device_handle& h, const T* ivars, std::size_t n,
                                             const int* status, cmp op, T value) {
  return detail::leader_then_sync<Scope>([&] { return wait_until_any(h, ivars, n, status, op, value); });
}

}  // namespace shoal
