// The two-member all-reduce with the copy engines (copy_engine_reduce.hpp).
#include "coll/copy_engine_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "coll/stream_common.hpp"
#include "host/cuda_check.hpp"
#include "host/world_impl.hpp"

namespace shoal::detail {
namespace {

// Chunks of about this size: small enough that the last chunk's reduction and push (the part that no
// other traffic overlaps) stay short, large enough that each copy runs near the copy engine's speed.
constexpr std::size_t kChunkBytes = std::size_t{16} << 20;

// [first, last) of `count` elements: half `member` of the buffer, then chunk `chunk` of `chunks` of it.
// Boundaries fall on 16 bytes (`grain` elements), the same on both members.
struct span_of {
  std::size_t first, last;
  std::size_t size() const { return last - first; }
};
span_of split(std::size_t count, std::size_t grain, std::size_t part, std::size_t parts) {
  auto edge = [&](std::size_t p) { return std::min(count, (count * p / parts + grain - 1) / grain * grain); };
  return {edge(part), edge(part + 1)};
}
span_of chunk_of(span_of half, std::size_t grain, std::size_t chunk, std::size_t chunks) {
  const span_of c = split(half.size(), grain, chunk, chunks);
  return {half.first + c.first, half.first + c.last};
}

}  // namespace

bool reduces_with_copy_engines(const team& t, algorithm algo, const void* dst, const void* src, std::size_t bytes) {
  return t.size() == 2 && algo == algorithm::two_shot && t.copy_engine_bytes() != 0 && dst != src &&
         bytes / 2 >= t.copy_engine_bytes();
}

// Streams: the caller's runs the meetings and the reductions; `push` copies this member's src chunks of
// the peer's half into the peer's dst; `gather` copies each reduced chunk of this member's half into the
// peer's dst once its reduction is done. Events hand each chunk over:
//   push:    copy chunk k ──► pushed[k]
//   caller:  wait pushed[k], meet (the peer's chunk k has landed here too), reduce chunk k ──► reduced[k]
//   gather:  wait reduced[k], copy chunk k
// and the exit meeting, after the gather stream joins, says every copy into this member's dst is done.
void reduce_pair_with_copy_engines(const team& t, const team_handle& h, void* dst, const void* src, std::size_t count,
                                   std::size_t element_bytes, cudaStream_t stream, const char* call,
                                   combine_launcher combine) {
  world::impl& w = t.internals();
  const int me = t.my_index(), peer = 1 - me;
  const std::size_t grain = std::max<std::size_t>(1, 16 / element_bytes);
  const span_of mine = split(count, grain, std::size_t(me), 2), theirs = split(count, grain, std::size_t(peer), 2);
  const std::size_t larger = std::max(mine.size(), theirs.size()) * element_bytes;
  const std::size_t chunks = std::clamp<std::size_t>((larger + kChunkBytes - 1) / kChunkBytes, 1, kMaxPairChunks);
  auto* const dst_bytes = static_cast<std::byte*>(dst);
  const auto* const src_bytes = static_cast<const std::byte*>(src);
  auto* const peer_dst =
      static_cast<std::byte*>(w.reachable(dst, count * element_bytes, t.pe_of(peer), call));

  std::lock_guard<std::mutex> lock(w.pair_mutex);
  w.pair.ensure();
  meet_on_stream_serialized(h, stream, call);  // the peer is in the call: its dst may be written
  SHOAL_CUDA_CHECK(cudaEventRecord(w.pair.push.fork, stream));
  SHOAL_CUDA_CHECK(cudaStreamWaitEvent(w.pair.push.stream, w.pair.push.fork, 0));
  for (std::size_t k = 0; k < chunks; ++k) {
    const span_of c = chunk_of(theirs, grain, k, chunks);
    if (c.size() != 0)
      SHOAL_CUDA_CHECK(cudaMemcpyAsync(peer_dst + c.first * element_bytes, src_bytes + c.first * element_bytes,
                                       c.size() * element_bytes, cudaMemcpyDeviceToDevice, w.pair.push.stream));
    SHOAL_CUDA_CHECK(cudaEventRecord(w.pair.pushed[k], w.pair.push.stream));
  }
  for (std::size_t k = 0; k < chunks; ++k) {
    const span_of c = chunk_of(mine, grain, k, chunks);
    SHOAL_CUDA_CHECK(cudaStreamWaitEvent(stream, w.pair.pushed[k], 0));
    meet_on_stream_serialized(h, stream, call);  // both pushes of chunk k have landed
    if (c.size() != 0) combine(t, dst_bytes + c.first * element_bytes, src_bytes + c.first * element_bytes, c.size(), stream);
    SHOAL_CUDA_CHECK(cudaEventRecord(w.pair.reduced[k], stream));
    SHOAL_CUDA_CHECK(cudaStreamWaitEvent(w.pair.gather.stream, w.pair.reduced[k], 0));
    if (c.size() != 0)
      SHOAL_CUDA_CHECK(cudaMemcpyAsync(peer_dst + c.first * element_bytes, dst_bytes + c.first * element_bytes,
                                       c.size() * element_bytes, cudaMemcpyDeviceToDevice, w.pair.gather.stream));
  }
  SHOAL_CUDA_CHECK(cudaEventRecord(w.pair.gather.join, w.pair.gather.stream));
  SHOAL_CUDA_CHECK(cudaStreamWaitEvent(stream, w.pair.gather.join, 0));
  meet_on_stream_serialized(h, stream, call);  // every copy into this member's dst is done
}

}  // namespace shoal::detail
