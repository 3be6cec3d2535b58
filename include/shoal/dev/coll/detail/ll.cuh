// Flag-in-data (LL) lines and the staged scratch of the one-step algorithms.
//
// An LL line is 16 bytes stored with one instruction: {data lo, flag, data hi, flag}. The receiver polls
// its own copy until both flags show the step's value, so data and signal arrive together: no fence and
// no separate flag store, at the price of sending twice the bytes. Lines live in the team's LL region,
// apart from the staged steps' data: member i's lines to this PE on a channel sit in ll_lines_of(channel,
// parity, i), and steps alternate between two parities. A member writes a parity again only two steps
// later, after this PE has sent its data of the step between, which it does after it finished reading
// that parity: so no line is overwritten before it is read.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shoal/dev/coll/detail/unit.cuh"

namespace shoal::detail {

// The flag of an epoch's lines: never 0 (fresh scratch is zero) and different for the two epochs that
// share a parity, for 2^32 - 1 epochs before it wraps.
__device__ inline std::uint32_t ll_flag(std::uint64_t epoch) { return std::uint32_t((epoch - 1) % 0xFFFFFFFFull) + 1; }

__device__ inline void ll_store(std::byte* line, std::uint64_t data, std::uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(line), "r"(std::uint32_t(data)), "r"(flag),
               "r"(std::uint32_t(data >> 32)), "r"(flag)
               : "memory");
}

// Polls this PE's line until both halves carry `flag`; returns the 8 data bytes.
__device__ inline std::uint64_t ll_load(const team_handle& t, const std::byte* line, std::uint32_t flag) {
  std::uint32_t lo, f0, hi, f1;
  auto ready = [&] {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(lo), "=r"(f0), "=r"(hi), "=r"(f1)
                 : "l"(line)
                 : "memory");
    return f0 == flag && f1 == flag;
  };
  if (!spin_until(ready, t.world.wait_timeout_ns))
    report_wait_timeout(t.world, "an LL line of a collective", line, f0 == flag ? f1 : f0, "==", flag);
  return std::uint64_t(lo) | (std::uint64_t(hi) << 32);
}

// Up to 8 bytes of [p, p + n) as a little-endian word; unaligned and short tails byte by byte.
__device__ inline std::uint64_t load_word(const std::byte* p, std::size_t n) {
  if (n >= 8 && reinterpret_cast<std::uintptr_t>(p) % 8 == 0) return *reinterpret_cast<const std::uint64_t*>(p);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n && i < 8; ++i) v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
__device__ inline void store_word(std::byte* p, std::size_t n, std::uint64_t v) {
  if (n >= 8 && reinterpret_cast<std::uintptr_t>(p) % 8 == 0) {
    *reinterpret_cast<std::uint64_t*>(p) = v;
    return;
  }
  for (std::size_t i = 0; i < n && i < 8; ++i) p[i] = std::byte((v >> (8 * i)) & 0xff);
}

// Asks L2 for the first word of [off, end) that this thread sends from each block `block(j)` (null:
// none), before the step takes its epoch: the fetch from memory then overlaps the read of the channel
// counter, and the loads after it hit L2. A prefetch into L2, the GPU's point of coherence, cannot make
// a later load see stale data, so the caller's writes before the call are still read as they are.
template <typename Unit, typename Block>
__device__ inline void prefetch_first_words(std::size_t off, std::size_t end, int n, Block block) {
  const std::size_t o = off + 8 * std::size_t(Unit::rank());
  if (o >= end) return;
  for (int j = 0; j < n; ++j)
    if (const std::byte* p = block(j)) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
}

// Payload bytes one LL step carries from one member to another on one channel.
__device__ inline std::size_t ll_payload(const team_handle& t) { return t.ll_bytes / 2; }

}  // namespace shoal::detail
