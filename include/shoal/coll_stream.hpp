// Collectives on a stream: each call enqueues its work on `stream` (one kernel, or kernels and copies on
// the copy-engine and hierarchical paths) and returns at once; no host
// synchronization inside, so every call can be captured in a CUDA graph and replayed. The algorithm is
// the cost model's choice for the team and size (SHOAL_ALGO_<COLLECTIVE> forces one). Every member of
// the team makes the same calls in the same order; PEs outside the team must not call.
//
// Buffers are symmetric (heap objects or registered buffers) on every member and hold at least what the
// call reads or writes; counts are in elements. The host checks this and throws shoal::error naming the
// call and the value for: a buffer that is not symmetric or too short, a root outside the team, an
// operator not defined for the type (bit operators on floating types), a destroyed team.
//
// Contracts match the device forms: on completion in stream order, `dst` holds the result on every
// member and `src` may be reused. Concurrent collectives on one team (other streams, or kernels using
// the team) need disjoint channels: pass `channels` = {first, count} of the team's channels. Calls on
// different streams may come from different host threads at the same time (each thread with the PE's
// device current, as for any CUDA call); the calls of one stream come in the same order on every member.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "shoal/coll_types.hpp"
#include "shoal/team.hpp"

namespace shoal {

struct channel_range {
  int first = 0;
  int count = 0;  // 0: all of the team's channels from `first`
};

namespace detail {
// count x size in bytes; throws shoal::error naming `call` and the count when the product overflows size_t (a
// wrapped product is small, passes the buffer checks, and the kernel then runs on the count itself).
std::size_t collective_bytes(std::size_t count, std::size_t size, const char* call);
}  // namespace detail

// Every member meets; barrier also completes each member's earlier RMA (as barrier_all does).
void barrier_on_stream(const team& t, cudaStream_t stream, channel_range channels = {});
void sync_on_stream(const team& t, cudaStream_t stream, channel_range channels = {});

// Byte forms of the data-moving collectives (the typed forms below call these).
void broadcast_bytes_on_stream(const team& t, void* dst, const void* src, std::size_t bytes, int root,
                               cudaStream_t stream, channel_range channels = {});
void fcollect_bytes_on_stream(const team& t, void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                              channel_range channels = {});
void alltoall_bytes_on_stream(const team& t, void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                              channel_range channels = {});

// root's src[0, count) lands in every member's dst. Only the root's src is read, but every member passes
// the same symmetric src, and every member checks it (so that a bad one throws on all of them alike).
template <typename T>
void broadcast_on_stream(const team& t, T* dst, const T* src, std::size_t count, int root, cudaStream_t stream,
                         channel_range channels = {}) {
  const std::size_t bytes = detail::collective_bytes(count, sizeof(T), "shoal::broadcast_on_stream");
  broadcast_bytes_on_stream(t, dst, src, bytes, root, stream, channels);
}
// Member i's src[0, count) lands in every member's dst[i * count, (i + 1) * count). In place: src may be
// dst + my_index() * count (each member's block already in its slot); no other overlap. Each member judges
// this alone: a src == dst passed by every member throws on every member but member 0 (for which it is the
// in-place form), and member 0 then waits for the others until SHOAL_WAIT_TIMEOUT traps.
template <typename T>
void fcollect_on_stream(const team& t, T* dst, const T* src, std::size_t count, cudaStream_t stream,
                        channel_range channels = {}) {
  fcollect_bytes_on_stream(t, dst, src, detail::collective_bytes(count, sizeof(T), "shoal::fcollect_on_stream"), stream,
                           channels);
}
// Member i's src[j * count, (j + 1) * count) lands in member j's dst[i * count, (i + 1) * count).
template <typename T>
void alltoall_on_stream(const team& t, T* dst, const T* src, std::size_t count, cudaStream_t stream,
                        channel_range channels = {}) {
  alltoall_bytes_on_stream(t, dst, src, detail::collective_bytes(count, sizeof(T), "shoal::alltoall_on_stream"), stream,
                           channels);
}

// All-reduce: every member's dst[k] = op over members of src[k], k < count. dst may equal src. Defined for
// T in is_reduce_type_v (instantiated in the library); half and bfloat16 accumulate in float. On the world
// team across nodes (m >= 2 PEs on each), out of place and on all channels, it may run hierarchically:
// reduce-scatter in the node, all-reduce among same-local-rank PEs, all-gather in the node, pipelined in
// chunks, the phase across nodes on the world's network stream joined to `stream` by events (it then needs
// 3 hardware work queues: docs/proxy-design.md). The model decides; SHOAL_ALGO_REDUCE=hierarchical forces
// it where it applies, any other forced algorithm runs flat.
template <typename T>
void reduce_on_stream(const team& t, T* dst, const T* src, std::size_t count, reduce_op op, cudaStream_t stream,
                      channel_range channels = {});
// Member i's dst[0, count) = op over members of src[i * count, (i + 1) * count).
template <typename T>
void reducescatter_on_stream(const team& t, T* dst, const T* src, std::size_t count, reduce_op op, cudaStream_t stream,
                             channel_range channels = {});

}  // namespace shoal
