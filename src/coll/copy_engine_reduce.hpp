// The on-stream all-reduce and reduce-scatter of a two-member team with the copy engines (fmt-free, for
// the .cu files).
//
// Each member's contribution to the peer's result goes in chunks: its copy engine pushes a src chunk
// straight into the peer's dst (the place of the peer's result), the members meet, and each adds its own
// src chunk into the dst chunk the peer pushed, in place. An all-reduce (member m owns half m) then pushes
// each reduced chunk into the peer's dst with a second copy engine. Later pushes run while earlier chunks
// are reduced (and sent back), so the links carry copy-engine traffic both ways nearly all the time:
// ~375 GB/s each way here, where SM copies reach ~350 when both directions are busy (perf notes 29).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "shoal/coll_model.hpp"
#include "shoal/team.hpp"
#include "shoal/team_handle.hpp"

namespace shoal::detail {

// Whether an on-stream reduction `coll` with a result of `bytes` in `dst`, from `src`, on `t`, that runs
// `algo` takes this path: two members reachable by load/store (SHOAL_COLL_CE_BYTES is 0 on other teams);
// an all-reduce out of place, two-shot, each half at least SHOAL_COLL_CE_BYTES; a reduce-scatter direct,
// each member's block more than twice SHOAL_COLL_CE_BYTES.
bool reduces_with_copy_engines(const team& t, collective coll, algorithm algo, const void* dst, const void* src,
                               std::size_t bytes);

// dst[k] = op(dst[k], src[k]) for k < count on `stream`, for the element type and operator at hand, on at
// most two CTAs per SM of a GPU with `sms` SMs.
using combine_launcher = void (*)(const team& t, unsigned sms, void* dst, const void* src, std::size_t count,
                                  cudaStream_t stream);

// Enqueues the whole reduction `coll` (reduce or reducescatter) with a result of `count` elements of
// `element_bytes` on `stream` (capturable in a CUDA graph). `combine` launches the local reduction of one
// chunk.
void reduce_pair_with_copy_engines(const team& t, const team_handle& h, collective coll, void* dst, const void* src,
                                   std::size_t count, std::size_t element_bytes, cudaStream_t stream, const char* call,
                                   combine_launcher combine);

}  // namespace shoal::detail
