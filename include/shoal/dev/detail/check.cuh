// Device-side checks. With SHOAL_DEBUG defined (the debug preset defines it for shoal's own targets; define
// it in your own kernels' translation units), argument checks print file, line, PE and the bad value, then
// trap; without it they compile to nothing.
#pragma once

#include <cstddef>
#include <cstdio>

#include "shoal/device_handle.hpp"

#ifdef SHOAL_DEBUG
#define SHOAL_DEVICE_CHECK(h, cond, what, value)                                                                      \
  do {                                                                                                                \
    if (!(cond)) {                                                                                                    \
      printf("shoal: PE %d: device check failed at %s:%d: %s (%s = %lld)\n", (h).pe, __FILE__, __LINE__, #cond, what, \
             static_cast<long long>(value));                                                                          \
      __trap();                                                                                                       \
    }                                                                                                                 \
  } while (0)
#else
#define SHOAL_DEVICE_CHECK(h, cond, what, value) \
  do {                                           \
  } while (0)
#endif

namespace shoal::detail {

__device__ inline bool in_range(const std::byte* base, std::uint64_t size, const void* p, std::size_t bytes) {
  auto* b = static_cast<const std::byte*>(p);
  return b >= base && bytes <= size && std::uint64_t(b - base) <= size - bytes;
}

// Whether count x size fits in size_t. A product that wraps is small: it passes in_symmetric, and the call then
// runs on the count itself, past the buffer.
__device__ inline bool product_fits(std::size_t count, std::size_t size) {
  return size == 0 || count <= ~std::size_t{0} / size;
}

// Bytes of this PE's heap slot mapped now: the figure the host publishes at init and at every growth, or the
// handle's own snapshot if larger (a handle made before the first publication). A handle taken before the heap
// grew then reaches the new chunks; an address past them, still inside the slot's reservation, fails the
// checks below instead of faulting with no file or line.
__device__ inline std::uint64_t heap_mapped_now(const device_handle& h) {
  const std::uint64_t live =
      h.sync != nullptr ? *static_cast<volatile const std::uint64_t*>(&h.sync->heap_mapped_bytes) : 0;
  return live > h.heap_capacity ? live : h.heap_capacity;
}

// [p, p+bytes) lies in what is mapped of this PE's heap slot, or in one registered buffer.
__device__ inline bool in_symmetric(const device_handle& h, const void* p, std::size_t bytes) {
  if (in_range(h.heap_base, heap_mapped_now(h), p, bytes)) return true;
  if (h.registered == nullptr) return false;
  for (int i = 0; i < h.registered->count; ++i)
    if (in_range(h.registered->entries[i].base, h.registered->entries[i].bytes, p, bytes)) return true;
  return false;
}

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte (empty ranges share none).
__device__ inline bool ranges_overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && x < y + b_bytes && y < x + a_bytes;
}

// The bytes of `count` elements of T; in debug builds a count whose bytes overflow traps, since the wrapped
// product would pass in_symmetric and move the wrong number of bytes.
template <typename T>
__device__ inline std::size_t typed_bytes([[maybe_unused]] const device_handle& h, std::size_t count) {
  SHOAL_DEVICE_CHECK(h, product_fits(count, sizeof(T)), "element count (its bytes overflow)", count);
  return count * sizeof(T);
}

}  // namespace shoal::detail

// Checks shared by the RMA calls: the PE is in range and [p, p+bytes) is symmetric (in_symmetric).
#define SHOAL_CHECK_PE(h, pe) SHOAL_DEVICE_CHECK(h, (pe) >= 0 && (pe) < (h).n_pes, "pe", pe)
// A signal word or atomic target: symmetric, and aligned to its size (a misaligned atomic faults and takes
// the CUDA context with it, with no file or line).
#define SHOAL_CHECK_ATOMIC_TARGET(h, p, size)                                                         \
  do {                                                                                                \
    SHOAL_CHECK_SYMMETRIC(h, p, size);                                                                \
    SHOAL_DEVICE_CHECK(h, reinterpret_cast<std::uintptr_t>(p) % (size) == 0, "misaligned by (bytes)", \
                       reinterpret_cast<std::uintptr_t>(p) % (size));                                 \
  } while (0)

// Two steps, so that the report names what is wrong: where the range starts, or how far it runs.
#define SHOAL_CHECK_SYMMETRIC(h, p, bytes)                                                                        \
  do {                                                                                                            \
    SHOAL_DEVICE_CHECK(h, ::shoal::detail::in_symmetric(h, p, 0), "offset from heap base",                        \
                       static_cast<const std::byte*>(static_cast<const void*>(p)) - (h).heap_base);               \
    SHOAL_DEVICE_CHECK(h, ::shoal::detail::in_symmetric(h, p, bytes), "bytes, past the symmetric object", bytes); \
  } while (0)
