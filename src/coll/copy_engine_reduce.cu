// The two-member reductions with the copy engines (copy_engine_reduce.hpp).
#include "coll/copy_engine_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "coll/pair_chunks.hpp"
#include "coll/stream_common.hpp"
#include "host/cuda_check.hpp"
#include "host/world_impl.hpp"

namespace shoal::detail {
namespace {

// What one member moves and reduces: byte addresses, and element counts for what it sends and what it
// reduces (an all-reduce's halves may differ by a grain).
struct pair_plan {
  const std::byte* to_peer;  // this member's contribution to the peer's result (its src) ...
  std::byte* peer_landing;   // ... lands in the peer's dst, where the peer reduces it
  std::size_t to_peer_elements;
  std::byte* result;     // this member's result (its dst), where the peer's contribution landed
  const std::byte* own;  // this member's own contribution to it (its src)
  std::size_t result_elements;
  std::byte* peer_result;  // all-reduce: the place of this member's result in the peer's dst; else null
};

// Streams: the caller's runs the meetings and the reductions; `push` copies this member's contribution to
// the peer's result, chunk by chunk; for an all-reduce, `gather` copies each reduced chunk of this member's
// result into the peer's dst once its reduction is done. Events hand each chunk over:
//   push:    copy chunk k ──► pushed[k]
//   caller:  wait pushed[k], meet (the peer's chunk k has landed here too), reduce chunk k ──► reduced[k]
//   gather:  wait reduced[k], copy chunk k
// After the gather stream joins, a last meeting says every copy into this member's dst is done. A
// reduce-scatter needs none: its result is complete when its last reduction is.
void run_pair(const team& t, const team_handle& h, const pair_plan& p, std::size_t element_bytes, cudaStream_t stream,
              const char* call, combine_launcher combine) {
  world::impl& w = t.internals();
  const std::size_t grain = grain_of(element_bytes);
  const std::size_t chunks = pair_chunks(std::max(p.to_peer_elements, p.result_elements) * element_bytes);
  auto bytes = [&](std::size_t elements) { return elements * element_bytes; };

  std::lock_guard<std::mutex> lock(w.pair_mutex);
  w.pair.ensure();
  meet_on_stream_serialized(h, stream, call);  // the peer is in the call: its dst may be written
  SHOAL_CUDA_CHECK(cudaEventRecord(w.pair.push.fork, stream));
  SHOAL_CUDA_CHECK(cudaStreamWaitEvent(w.pair.push.stream, w.pair.push.fork, 0));
  for (std::size_t k = 0; k < chunks; ++k) {
    const element_span c = split_on_grain(p.to_peer_elements, grain, k, chunks);
    if (c.size() != 0)
      SHOAL_CUDA_CHECK(cudaMemcpyAsync(p.peer_landing + bytes(c.first), p.to_peer + bytes(c.first), bytes(c.size()),
                                       cudaMemcpyDeviceToDevice, w.pair.push.stream));
    SHOAL_CUDA_CHECK(cudaEventRecord(w.pair.pushed[k], w.pair.push.stream));
  }
  for (std::size_t k = 0; k < chunks; ++k) {
    const element_span c = split_on_grain(p.result_elements, grain, k, chunks);
    SHOAL_CUDA_CHECK(cudaStreamWaitEvent(stream, w.pair.pushed[k], 0));
    meet_on_stream_serialized(h, stream, call);  // both pushes of chunk k have landed
    if (c.size() != 0)
      combine(t, unsigned(h.resident_ctas), p.result + bytes(c.first), p.own + bytes(c.first), c.size(), stream);
    if (p.peer_result == nullptr) continue;
    SHOAL_CUDA_CHECK(cudaEventRecord(w.pair.reduced[k], stream));
    SHOAL_CUDA_CHECK(cudaStreamWaitEvent(w.pair.gather.stream, w.pair.reduced[k], 0));
    if (c.size() != 0)
      SHOAL_CUDA_CHECK(cudaMemcpyAsync(p.peer_result + bytes(c.first), p.result + bytes(c.first), bytes(c.size()),
                                       cudaMemcpyDeviceToDevice, w.pair.gather.stream));
  }
  if (p.peer_result == nullptr) return;
  SHOAL_CUDA_CHECK(cudaEventRecord(w.pair.gather.join, w.pair.gather.stream));
  SHOAL_CUDA_CHECK(cudaStreamWaitEvent(stream, w.pair.gather.join, 0));
  meet_on_stream_serialized(h, stream, call);  // every copy into this member's dst is done
}

}  // namespace

bool reduces_with_copy_engines(const team& t, collective coll, algorithm algo, const void* dst, const void* src,
                               std::size_t bytes) {
  if (t.size() != 2 || t.copy_engine_bytes() == 0) return false;
  if (coll == collective::reduce)
    return algo == algorithm::two_shot && dst != src && bytes / 2 >= t.copy_engine_bytes();
  // One phase of pushes leaves less to overlap than an all-reduce's two, so a reduce-scatter gains only
  // on larger blocks: measured 1.5% behind the SM copies at 64 MiB, 1.5% ahead at 96, 3-5% from 128 (perf
  // notes 29).
  return coll == collective::reducescatter && algo == algorithm::direct && bytes > 2 * t.copy_engine_bytes();
}

void reduce_pair_with_copy_engines(const team& t, const team_handle& h, collective coll, void* dst, const void* src,
                                   std::size_t count, std::size_t element_bytes, cudaStream_t stream, const char* call,
                                   combine_launcher combine) {
  const int me = t.my_index(), peer = 1 - me;
  const std::size_t dst_bytes = count * element_bytes;
  auto* const mine = static_cast<std::byte*>(dst);
  auto* const theirs = static_cast<std::byte*>(t.internals().reachable(dst, dst_bytes, t.pe_of(peer), call));
  const auto* const from = static_cast<const std::byte*>(src);
  if (coll == collective::reduce) {
    // Member m owns half m of the buffer: it sends its src of the peer's half to the same place of the
    // peer's dst, reduces its own half in place and sends the result to the same place of the peer's dst.
    const std::size_t grain = grain_of(element_bytes);
    const element_span my_half = split_on_grain(count, grain, std::size_t(me), 2),
                       peer_half = split_on_grain(count, grain, std::size_t(peer), 2);
    const std::size_t at_mine = my_half.first * element_bytes, at_peers = peer_half.first * element_bytes;
    run_pair(t, h,
             {.to_peer = from + at_peers,
              .peer_landing = theirs + at_peers,
              .to_peer_elements = peer_half.size(),
              .result = mine + at_mine,
              .own = from + at_mine,
              .result_elements = my_half.size(),
              .peer_result = theirs + at_mine},
             element_bytes, stream, call, combine);
  } else {
    // Block j of src is member j's: this member's block `peer` lands in the peer's dst, and its own block
    // is added to what the peer sent into its dst.
    run_pair(t, h,
             {.to_peer = from + std::size_t(peer) * dst_bytes,
              .peer_landing = theirs,
              .to_peer_elements = count,
              .result = mine,
              .own = from + std::size_t(me) * dst_bytes,
              .result_elements = count,
              .peer_result = nullptr},
             element_bytes, stream, call, combine);
  }
}

}  // namespace shoal::detail
