// Shared by the on-stream collectives (shoal/coll_stream.hpp): argument checks and the launch shape.
// fmt-free, for the .cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "shoal/coll_stream.hpp"
#include "shoal/team_handle.hpp"

namespace shoal::detail {

// The team's handle narrowed to `channels`, after checking the team is alive, this PE is a member and
// the range is inside the team's channels. Throws shoal::error naming `call`.
team_handle stream_view(const team& t, channel_range channels, const char* call);

// Throws unless [p, p + bytes) is symmetric (heap or registered) on this PE, or p is null and bytes 0 (a call of
// count 0). `what` names the argument.
void check_buffer(const team& t, const void* p, std::size_t bytes, const char* call, const char* what);
void check_root(const team& t, int root, const char* call);
void check_op_for_floating(reduce_op op, const char* call);  // bit operators: integers only
// A reduce_op cast from a number outside the enumeration would enqueue nothing and leave dst as it was.
void check_reduce_op(reduce_op op, const char* call);
// Bytes of `members` blocks of `block_bytes` each (fcollect's dst, alltoall's buffers, a reduce-scatter's src);
// throws naming the block size and the member count when the product overflows size_t.
std::size_t team_bytes(std::size_t block_bytes, int members, const char* call);
void check_no_overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes, const char* call);

// Threads per CTA of on-stream collective kernels (their launch bound); LL launches take fewer where the
// CTA's share has fewer 8-byte words (plan_launch).
inline constexpr unsigned kCollThreads = 512;
// Least bytes per CTA of an on-stream LL, staged (one_shot) and streaming (two_shot, direct) call.
inline constexpr std::uint64_t kLLShare = 1024;
inline constexpr std::uint64_t kStagedShare = 4 * 1024;
inline constexpr std::uint64_t kStreamShare = 16 * 1024;
// On a team that spans nodes each CTA's share is at least one proxy message each way, and the proxy thread
// spends ~20 us of CUDA and network calls per message whatever its size (about what 512 KiB take to cross
// at ~20 GB/s), so shares are at least this large there: a 64 KiB call takes one CTA, not eight.
inline constexpr std::uint64_t kProxiedShare = 512 * 1024;

struct coll_launch {
  unsigned ctas;
  unsigned threads;
};
// CTAs for a grid-scope collective running `algo`: as many as give each a useful share, at most the
// view's channels; the same on every member. LL and staged steps carry `block_bytes` (what one member
// sends one peer) per CTA and step; the other algorithms stream `total_bytes` (what a member moves).
// Threads per CTA: kCollThreads, or for LL one per 8-byte word of the largest share and for one_shot one per
// 16-byte vector of it (whole warps, at most kCollThreads). Every collective kernel works with any of these
// block sizes.
coll_launch plan_launch(const team_handle& t, algorithm algo, std::uint64_t block_bytes, std::uint64_t total_bytes);

// Whether an on-stream broadcast, fcollect or alltoall that runs `algo` on blocks of `bytes` moves them with
// the copy engines instead of a kernel (direct, blocks of at least team::copy_engine_bytes()). The
// reductions' counterpart is reduces_with_copy_engines (coll/copy_engine_reduce.hpp).
bool exchanges_with_copy_engines(const team& t, algorithm algo, std::uint64_t bytes);

// Whether an on-stream call launches its collective's LL kernel (see detail::algorithm_set): the host
// picked `algo` = LL and every CTA keeps it for its share of the `block_bytes` that one member sends one
// peer, as the device's team_handle::pick_for_unit decides. Otherwise the kernel of the other algorithms runs.
bool runs_ll_kernel(const team_handle& t, collective coll, algorithm algo, std::uint64_t block_bytes,
                    coll_launch launch);

// An on-stream collective's kernels, one per detail::algorithm_set it launches.
template <typename Kernel>
struct coll_kernels {
  Kernel ll;            // ll_only
  Kernel within_node;   // all_but_ll
  Kernel across_nodes;  // across_nodes
};

// The kernel an on-stream call launches: across_nodes on a team that spans nodes, else ll where
// runs_ll_kernel says so, else within_node.
template <typename Kernel>
Kernel kernel_for(const team_handle& t, collective coll, algorithm algo, std::uint64_t block_bytes, coll_launch launch,
                  const coll_kernels<Kernel>& kernels) {
  if (t.spans_nodes != 0) return kernels.across_nodes;
  return runs_ll_kernel(t, coll, algo, block_bytes, launch) ? kernels.ll : kernels.within_node;
}

// A sync of the team's members on `stream` (one small kernel). Launched without overlap: it starts only
// after everything before it on the stream, event waits and copies included, so arriving means "my
// earlier work on this stream is done".
void meet_on_stream_serialized(const team_handle& h, cudaStream_t stream, const char* call);

// Throws shoal::error(errc::cuda) naming `call` when `status` is an error (and clears it).
void check_launch(cudaError_t status, const char* call);

// Whether this team's on-stream collectives overlap their launch with the previous kernel (SHOAL_COLL_PDL).
bool overlap_launches(const team& t);

// Launches `kernel` (a __global__ function) with the arguments `params` points at, each of the kernel's own
// parameter type, through the driver (cuLaunchKernelEx on the kernel's CUfunction, looked up once per host
// thread, device and kernel): the host enqueues it 0.1-0.4 us faster than through cudaLaunchKernelEx,
// which finds the kernel by its address at every launch, and a loop of small calls bound by the host's
// enqueue rate runs 3-8% faster (perf notes 68). With `overlap` it is a programmatic dependent launch (see
// launch_on_stream). Throws shoal::error(errc::cuda) naming `call`.
void launch_kernel(const void* kernel, coll_launch launch, bool overlap, cudaStream_t stream, void** params,
                   const char* call);

// Launches an on-stream kernel; with `overlap` it is a programmatic dependent launch: the GPU may start
// it while the previous kernel of the stream still runs, which hides the launch latency of back-to-back
// calls (CUDA graphs included). Every kernel launched here with `overlap` must call await_previous_kernel()
// before it touches memory (without the attribute that call does nothing); without `overlap` a kernel
// starts after everything before it on the stream, as a <<<...>>> launch does.
template <typename... Params, typename... Args>
void launch_on_stream(bool overlap, void (*kernel)(Params...), coll_launch launch, cudaStream_t stream,
                      const char* call, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "launch_on_stream: one argument per kernel parameter");
  std::tuple<Params...> values(std::forward<Args>(args)...);  // converted as a call of the kernel would
  std::apply(
      [&](Params&... value) {
        void* params[] = {static_cast<void*>(&value)...};
        launch_kernel(reinterpret_cast<const void*>(kernel), launch, overlap, stream, params, call);
      },
      values);
}

// Launches an on-stream collective kernel of team `t`, overlapped when overlap_launches(t).
template <typename... Params, typename... Args>
void launch_coll(const team& t, void (*kernel)(Params...), coll_launch launch, cudaStream_t stream, const char* call,
                 Args&&... args) {
  launch_on_stream(overlap_launches(t), kernel, launch, stream, call, std::forward<Args>(args)...);
}

#ifdef __CUDACC__
// Asks L2 for the first kMaxPrefetchBytes of a call's source, one 128-byte line per thread of the grid,
// before the kernel waits for the previous one: a source that sits in HBM (written long before) then
// arrives while that kernel finishes, instead of after. A prefetch into L2, the GPU's point of coherence
// (peers' writes into this GPU land there too), cannot make a later load see stale data: what the
// previous kernel writes is still read as written. Past the first MiB a call is bound by bandwidth, not by
// its first loads, so the prefetch stops there.
inline constexpr std::size_t kMaxPrefetchBytes = std::size_t{1} << 20;
__device__ inline void prefetch_source(const void* src, std::size_t bytes) {
  const std::size_t at = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) * 128;
  if (at < bytes && at < kMaxPrefetchBytes)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const std::byte*>(src) + at));
}

// The first statement of every kernel launch_coll starts (after prefetch_source): waits until the previous kernel of
// the stream has finished and its writes are visible, then lets the next kernel's launch begin. Releasing the next
// launch only after the wait keeps at most two collective grids on the GPU: the one running and the one
// launched behind it, whose CTAs wait here without blocking the first (all of its CTAs were resident
// before they released the launch).
__device__ inline void await_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The first statement of a one-thread kernel on a stream (the stream operations' signal add and wait): lets
// the next kernel's launch begin at once, then waits for the previous kernel. The next kernel still waits
// for this one to finish before it touches memory (its own await); only its launch overlaps this one. A
// grid this small costs nothing to hold resident, so it need not wait before releasing the next launch as
// await_previous_kernel does. Under graph replay its calls took 1.03 µs where released after the wait they
// took 1.08, and 1.72 without overlap (perf notes 71).
__device__ inline void release_next_launch_then_await_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
#endif

}  // namespace shoal::detail
