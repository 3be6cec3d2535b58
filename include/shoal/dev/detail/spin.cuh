// The one spin-wait of the device API. Every wait in shoal goes through it, so every wait has the same
// timeout (device_handle::wait_timeout_ns, from SHOAL_WAIT_TIMEOUT) and the same report on expiry:
// which PE waited, for what, at which address, the last value seen and the condition.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "shoal/device_handle.hpp"

namespace shoal::detail {

__device__ inline std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until ready() returns true or timeout_ns passes (0: forever). Returns whether ready.
template <typename Ready>
__device__ inline bool spin_until(Ready ready, std::uint64_t timeout_ns) {
  if (ready()) return true;
  std::uint64_t start = global_timer_ns();
  for (unsigned spins = 0;; ++spins) {
    if (ready()) return true;
    // The clock is read every 64 polls: cheap, and timeouts are seconds, not microseconds.
    if (timeout_ns != 0 && spins % 64 == 0 && global_timer_ns() - start > timeout_ns) return ready();
  }
}

// The report prints the values as what they are: a signed word as signed (-1, not 18446744073709551615), a
// float as a float, anything else that is not an integer as its bits in hex.
template <typename T>
[[noreturn]] __device__ inline void report_wait_timeout(const device_handle& h, const char* what, const void* address,
                                                        T seen, const char* condition, std::type_identity_t<T> wanted) {
  const double seconds = double(h.wait_timeout_ns) * 1e-9;
  if constexpr (std::is_floating_point_v<T>) {
    printf("shoal: PE %d timed out after %.3f s waiting for %s at %p: last value %.9g, waiting for value %s %.9g\n",
           h.pe, seconds, what, address, double(seen), condition, double(wanted));
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    printf("shoal: PE %d timed out after %.3f s waiting for %s at %p: last value %lld, waiting for value %s %lld\n",
           h.pe, seconds, what, address, static_cast<long long>(seen), condition, static_cast<long long>(wanted));
  } else if constexpr (std::is_integral_v<T>) {
    printf("shoal: PE %d timed out after %.3f s waiting for %s at %p: last value %llu, waiting for value %s %llu\n",
           h.pe, seconds, what, address, static_cast<unsigned long long>(seen), condition,
           static_cast<unsigned long long>(wanted));
  } else {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a word of at most 8 bytes");
    unsigned long long seen_bits = 0, wanted_bits = 0;
    memcpy(&seen_bits, &seen, sizeof(T));
    memcpy(&wanted_bits, &wanted, sizeof(T));
    printf(
        "shoal: PE %d timed out after %.3f s waiting for %s at %p: last value 0x%llx, waiting for value %s 0x%llx "
        "(bits)\n",
        h.pe, seconds, what, address, seen_bits, condition, wanted_bits);
  }
  __trap();
}

}  // namespace shoal::detail
