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
// groups do not divide evenly the first parts take one group more than the others.
SHOAL_HD inline range split_range(std::size_t count, std::size_t group, int part, int parts) {
  const std::size_t groups = (count + group - 1) / group;
  std::size_t per, extra;
  // On the GPU a 64-bit division is a subroutine of ~100 instructions: in an LL call it cost 0.2 µs
  // (perf notes 43). Any real count fits 32 bits of groups.
  const auto p = std::uint32_t(parts);
  if (groups <= UINT32_MAX && (p & (p - 1)) == 0) {
    // A power of two (grids of 1, 2, 4, 8 ... CTAs): a shift. Even the 32-bit division sat on the
    // dependent chain of every in-kernel call's set-up (perf notes 55).
    const int shift = popcount32(p - 1);
    per = std::uint32_t(groups) >> shift;
    extra = std::uint32_t(groups) & (p - 1);
  } else if (groups <= UINT32_MAX) {
    per = std::uint32_t(groups) / p;
    extra = std::uint32_t(groups) % p;
  } else {
    per = groups / std::size_t(parts);
    extra = groups % std::size_t(parts);
  }
  const std::size_t first = std::size_t(part) * per + (std::size_t(part) < extra ? std::size_t(part) : extra);
  const std::size_t n = per + (std::size_t(part) < extra ? 1 : 0);
  std::size_t begin = first * group, end = (first + n) * group;
  if (begin > count) begin = count;
  if (end > count) end = count;
  return {begin, end};
}

}  // namespace shoal::detail
