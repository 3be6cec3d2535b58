// How a spread bulk copy (block- and grid-scope put/get) is shared among a scope's threads: where it starts,
// and which threads can have a part. Host and device code, so CPU tests can check both.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shoal/detail/host_device.hpp"

namespace shoal::detail {

// The rank a thread takes in a bulk copy: `rank` of `size` rotated down by a whole number of warps hashed
// from the copy's address `key`. A message smaller than the scope occupies only its first ranks; were
// every call to start at rank 0, a stream of small put_nbi calls at block or grid scope would run one after
// the other on the same warps, each stalled on its own source loads while the others idle. Starting each
// message at a warp hashed from its address spreads consecutive messages over the scope, so their loads
// overlap (perf notes 45). Whole warps keep each warp's accesses aligned as before, and the rotation is a
// permutation of [0, size), so every byte is still copied exactly once.
SHOAL_HD inline unsigned spread_rank(unsigned rank, unsigned size, const void* key) {
  const unsigned warps = size / 32;
  // Fibonacci hashing of the 16-byte granule: messages at any stride, powers of two included, start on
  // well-spread warps. The top bits of the product are the well-mixed ones.
  const auto granule = std::uint64_t(reinterpret_cast<std::uintptr_t>(key) >> 4);
  const auto mixed = unsigned((granule * 0x9E3779B97F4A7C15ull) >> 32);
  const unsigned first = unsigned((std::uint64_t(mixed) * warps) >> 32) * 32;  // warp in [0, warps), no division
  return rank >= first ? rank - first : rank + (size - first);  // rank + size - first would wrap past 2^32
}

// Whether thread `rank` can have a part in a copy of `bytes` bytes in units of `unit` bytes (the split of
// detail::copy_aligned): the edges before and after the units go to ranks below `unit`, the units to ranks
// below bytes / unit. A spread copy's thread for which this is false returns at once.
SHOAL_HD constexpr bool may_have_share(std::size_t rank, std::size_t bytes, std::size_t unit) {
  return rank < unit || rank < bytes / unit;
}

}  // namespace shoal::detail
