// How a collective's units share its data: a range of elements per unit. Host and device code both use
// it: the device to find each unit's share, the host to know the largest share a launch gives a CTA
// (detail::runs_ll_kernel).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "shoal/detail/host_device.hpp"

namespace shoal::detail {

// Elements [begin, end).
struct range {
  std::size_t begin;
  std::size_t end;
  SHOAL_HD std::size_t size() const { return end - begin; }
};

// Set bits of `x`, on the host or the device.
SHOAL_HD inline int popcount32(std::uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __popc(x);
#else
  return std::popcount(x);
#endif
}

// Part `part` of `parts` (0 <= part < parts) of `count` elements split in groups of `group` (the last one
// may be short): each part starts on a group boundary (16 bytes for the vector paths), and where the
// groups do not divide evenly the first parts take one group more than the others. Past 2^32 groups
// (64 GiB of bytes in 16-byte groups) the groups double until they fit 32 bits: the parts still tile the
// count on group boundaries, in coarser steps.
//
// The arithmetic is 32-bit and, for a power of two of parts, a shift: on the GPU a 64-bit division is a
// subroutine of ~100 instructions (0.2 µs of an LL call, perf notes 43), and even the 32-bit one sat on
// the dependent chain of every in-kernel call's set-up (perf notes 55). Without a 64-bit path the set-up
// of every in-kernel collective is shorter and spills less (perf notes 56).
SHOAL_HD inline range split_range(std::size_t count, std::size_t group, int part, int parts) {
  if (parts == 1) return {0, count};  // thread, warp and block scope: folded away
  std::size_t groups = (count + group - 1) / group;
  while (groups > UINT32_MAX) {  // ceil(ceil(count / g) / 2) == ceil(count / 2g)
    groups = (groups + 1) / 2;
    group *= 2;
  }
  const auto g = std::uint32_t(groups), p = std::uint32_t(parts), k = std::uint32_t(part);
  std::uint32_t per, extra;
  if ((p & (p - 1)) == 0) {  // grids of 2, 4, 8 ... CTAs
    const int shift = popcount32(p - 1);
    per = g >> shift;
    extra = g & (p - 1);
  } else {
    per = g / p;
    extra = g % p;
  }
  const std::size_t first = std::size_t(k) * per + (k < extra ? k : extra);
  const std::size_t n = per + (k < extra ? 1 : 0);
  std::size_t begin = first * group, end = (first + n) * group;
  if (begin > count) begin = count;
  if (end > count) end = count;
  return {begin, end};
}

}  // namespace shoal::detail
