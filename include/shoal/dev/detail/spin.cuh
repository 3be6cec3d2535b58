// The one spin-wait of the device API. Every wait in shoal goes through it, so every wait has the same
// timeout (device_handle::wait_timeout_ns, from SHOAL_WAIT_TIMEOUT) and the same report on expiry:
// which PE waited, for what, at which address, the last value seen and the condition.
#pragma once

#include <cstdint>
#include <cstdio>

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

[[noreturn]] __device__ inline void report_wait_timeout(const device_handle& h, const char* what, const void* address,
                                                        unsigned long long seen, const char* condition,
                                                        unsigned long long wanted) {
  printf("shoal: PE %d timed out after %.3f s waiting for %s at %p: last value %llu, waiting for value %s %llu\n", h.pe,
         double(h.wait_timeout_ns) * 1e-9, what, address, seen, condition, wanted);
  __trap();
}

}  // namespace shoal::detail
