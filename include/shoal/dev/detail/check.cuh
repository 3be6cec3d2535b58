// Device-side checks. With SHOAL_DEBUG defined (the debug preset defines it), argument checks print
// file, line, PE and the bad value, then trap; without it they compile to nothing.
#pragma once

#include <cstdio>

#include "shoal/device_handle.hpp"

#ifdef SHOAL_DEBUG
#define SHOAL_DEVICE_CHECK(h, cond, what, value)                                                           \
  do {                                                                                                     \
    if (!(cond)) {                                                                                         \
      printf("shoal: PE %d: device check failed at %s:%d: %s (%s = %lld)\n", (h).pe, __FILE__, __LINE__, \
             #cond, what, static_cast<long long>(value));                                                  \
      __trap();                                                                                            \
    }                                                                                                      \
  } while (0)
#else
#define SHOAL_DEVICE_CHECK(h, cond, what, value) \
  do {                                           \
  } while (0)
#endif

namespace shoal::detail {

__device__ inline bool in_heap(const device_handle& h, const void* p, std::size_t bytes) {
  auto* b = static_cast<const std::byte*>(p);
  return b >= h.heap_base && bytes <= h.heap_capacity && b - h.heap_base <= std::ptrdiff_t(h.heap_capacity - bytes);
}

}  // namespace shoal::detail

// Checks shared by the RMA calls: the PE is in range and [p, p+bytes) lies in this PE's heap slot.
#define SHOAL_CHECK_PE(h, pe) SHOAL_DEVICE_CHECK(h, (pe) >= 0 && (pe) < (h).n_pes, "pe", pe)
#define SHOAL_CHECK_SYMMETRIC(h, p, bytes) \
  SHOAL_DEVICE_CHECK(h, ::shoal::detail::in_heap(h, p, bytes), "offset from heap base", \
                     static_cast<const std::byte*>(static_cast<const void*>(p)) - (h).heap_base)
