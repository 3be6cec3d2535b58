// The on-stream all-reduce of a two-member team with the copy engines (fmt-free, for the .cu files).
//
// Member m owns half m of the buffer. Each half goes in chunks: a member's copy engine pushes its src
// chunk of the peer's half straight into the peer's dst (the place of the result), the members meet,
// each adds its own src chunk into that dst chunk in place, and a second copy engine pushes the reduced
// chunk into the peer's dst. The pushes of later chunks run while earlier chunks are reduced and sent
// back, so the links carry copy-engine traffic both ways nearly all the time: ~375 GB/s each way here,
// where SM copies reach ~350 when both directions are busy (perf notes 29).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "shoal/coll_model.hpp"
#include "shoal/team.hpp"
#include "shoal/team_handle.hpp"

namespace shoal::detail {

// Whether an on-stream all-reduce of `bytes` from `src` into `dst` on `t` that runs `algo` takes this path:
// two members reachable by load/store, out of place, two-shot, each half at least SHOAL_COLL_CE_BYTES.
bool reduces_with_copy_engines(const team& t, algorithm algo, const void* dst, const void* src, std::size_t bytes);

// dst[k] = op(dst[k], src[k]) for k < count on `stream`, for the element type and operator at hand.
using combine_launcher = void (*)(const team& t, void* dst, const void* src, std::size_t count, cudaStream_t stream);

// Enqueues the whole all-reduce of `count` elements of `element_bytes` on `stream` (capturable in a CUDA
// graph). `combine` launches the local reduction of one chunk.
void reduce_pair_with_copy_engines(const team& t, const team_handle& h, void* dst, const void* src, std::size_t count,
                                   std::size_t element_bytes, cudaStream_t stream, const char* call,
                                   combine_launcher combine);

}  // namespace shoal::detail
