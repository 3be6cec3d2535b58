// How the two-member copy-engine reductions (copy_engine_reduce.hpp) cut their buffers: halves, then
// chunks, on 16-byte boundaries, computed the same on both members from the element count alone.
// Header-only and CUDA-free, so the CPU tests check it.
#pragma once

#include <algorithm>
#include <cstddef>

namespace shoal::detail {

// At most this many chunks per call: the world keeps one pair of hand-over events per chunk.
inline constexpr std::size_t kMaxPairChunks = 16;
// Chunks of about this size: small enough that the last chunk's reduction and push (the part that no
// other traffic overlaps) stay short, large enough that each copy runs near the copy engine's speed.
inline constexpr std::size_t kPairChunkBytes = std::size_t{16} << 20;

// Elements [first, last).
struct element_span {
  std::size_t first = 0, last = 0;
  std::size_t size() const { return last - first; }
};

// Part `part` of `parts` of [0, count): the parts tile the range in order, and every edge inside it is a
// multiple of `grain` (the elements in 16 bytes), so no element is split and vector loads stay aligned.
// Parts may be empty when count is small.
inline element_span split_on_grain(std::size_t count, std::size_t grain, std::size_t part, std::size_t parts) {
  auto edge = [&](std::size_t p) { return std::min(count, (count * p / parts + grain - 1) / grain * grain); };
  return {edge(part), edge(part + 1)};
}

// Elements in 16 bytes of elements of `element_bytes` (at least 1).
inline std::size_t grain_of(std::size_t element_bytes) { return std::max<std::size_t>(1, 16 / element_bytes); }

// Chunks for a call whose larger share (half or block) is `bytes`: one per kPairChunkBytes, 1 to kMaxPairChunks.
inline std::size_t pair_chunks(std::size_t bytes) {
  return std::clamp<std::size_t>((bytes + kPairChunkBytes - 1) / kPairChunkBytes, 1, kMaxPairChunks);
}

}  // namespace shoal::detail
