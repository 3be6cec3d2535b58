// On-stream barrier, sync, broadcast, fcollect and alltoall: one grid-scope kernel each, except direct
// exchanges of large blocks, which move them with the copy engines between two meeting kernels.
#include <cstddef>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "coll/stream_common.hpp"
#include "host/cuda_check.hpp"
#include "host/world_impl.hpp"
#include "shoal/dev/coll.cuh"

namespace shoal {
namespace {

// barrier(block, t) or sync(block, t), opening a kernel: the barrier's arrivals are release stores, which
// cost less than a fence there (perf notes 70).
__global__ void meet_kernel(team_handle t, bool quiet_first) {
  detail::await_previous_kernel();
  detail::team_meet(block, t, quiet_first ? detail::earlier_writes::release_each : detail::earlier_writes::unordered);
}

// Each exchange has a kernel per detail::algorithm_set (LL, the others within a node, across nodes);
// detail::kernel_for gives the one the host's pick and the team need.
using detail::algorithm_set;
using detail::coll_kernels;
using detail::kernel_for;

template <algorithm_set kSet>
__global__ void __launch_bounds__(detail::kCollThreads)
    broadcast_kernel(team_handle t, void* dst, const void* src, std::size_t bytes, int root) {
  if (t.index == root) detail::prefetch_source(src, bytes);
  detail::await_previous_kernel();
  detail::broadcast_bytes<kSet>(grid, t, dst, src, bytes, root);
}
template <algorithm_set kSet>
__global__ void __launch_bounds__(detail::kCollThreads)
    fcollect_kernel(team_handle t, void* dst, const void* src, std::size_t bytes) {
  detail::prefetch_source(src, bytes);
  detail::await_previous_kernel();
  detail::fcollect_bytes<kSet>(grid, t, dst, src, bytes);
}
template <algorithm_set kSet>
__global__ void __launch_bounds__(detail::kCollThreads)
    alltoall_kernel(team_handle t, void* dst, const void* src, std::size_t bytes) {
  detail::prefetch_source(src, bytes * t.size());
  detail::await_previous_kernel();
  detail::alltoall_bytes<kSet>(grid, t, dst, src, bytes);
}

// The kernels of each exchange, one per algorithm set.
const coll_kernels broadcast_kernels{broadcast_kernel<algorithm_set::ll_only>,
                                     broadcast_kernel<algorithm_set::all_but_ll>,
                                     broadcast_kernel<algorithm_set::across_nodes>};
const coll_kernels fcollect_kernels{fcollect_kernel<algorithm_set::ll_only>, fcollect_kernel<algorithm_set::all_but_ll>,
                                    fcollect_kernel<algorithm_set::across_nodes>};
const coll_kernels alltoall_kernels{alltoall_kernel<algorithm_set::ll_only>, alltoall_kernel<algorithm_set::all_but_ll>,
                                    alltoall_kernel<algorithm_set::across_nodes>};

void meet_on_stream(const team& t, cudaStream_t stream, channel_range channels, bool quiet_first, const char* call) {
  const team_handle h = detail::stream_view(t, channels, call);
  detail::launch_coll(t, meet_kernel, {1, 32}, stream, call, h, quiet_first);
}

// One block copy of an exchange: `bytes` from `from` to `to` (a peer's memory through its mapping, or
// this PE's own dst).
struct block_copy {
  void* to;
  const void* from;
};

// The direct algorithm with the copy engines: an entry meeting (every member is in the call, so its dst
// may be overwritten), the copies, an exit meeting (every copy into this PE has landed: a member
// arrives only after its copies completed in stream order). The copy to this PE's own dst runs on the
// world's side stream, forked and joined with events, so it overlaps the copies to peers; all of it
// can be captured in a CUDA graph. The copy engines reach ~395 GB/s over NVLink where SM copies reach
// ~365, and no CTA is left behind at the end of a large copy.
void exchange_with_copy_engines(const team& t, const team_handle& h, cudaStream_t stream, const char* call,
                                std::span<const block_copy> remote, const block_copy* local, std::size_t bytes) {
  detail::launch_coll(t, meet_kernel, {1, 32}, stream, call, h, false);
  world::impl& w = t.internals();
  std::lock_guard<std::mutex> lock(w.side_mutex);
  w.side.ensure();
  if (local != nullptr) {
    SHOAL_CUDA_CHECK(cudaEventRecord(w.side.fork, stream));
    SHOAL_CUDA_CHECK(cudaStreamWaitEvent(w.side.stream, w.side.fork, 0));
    SHOAL_CUDA_CHECK(cudaMemcpyAsync(local->to, local->from, bytes, cudaMemcpyDeviceToDevice, w.side.stream));
    SHOAL_CUDA_CHECK(cudaEventRecord(w.side.join, w.side.stream));
  }
  for (const block_copy& c : remote) SHOAL_CUDA_CHECK(cudaMemcpyAsync(c.to, c.from, bytes, cudaMemcpyDefault, stream));
  if (local != nullptr) SHOAL_CUDA_CHECK(cudaStreamWaitEvent(stream, w.side.join, 0));
  detail::launch_coll(t, meet_kernel, {1, 32}, stream, call, h, false);
}

// This PE's block copies of an exchange whose member j receives `bytes` at dst + me * dst_stride from
// send_block(j), for the members `sends_to` selects; the copy to itself only when it is not in place.
template <typename SendBlock, typename SendsTo>
void copy_engine_exchange(const team& t, const team_handle& h, cudaStream_t stream, const char* call, void* dst,
                          std::size_t dst_stride, std::size_t bytes, SendBlock send_block, SendsTo sends_to) {
  const int me = t.my_index();
  auto* own_to = static_cast<std::byte*>(dst) + std::size_t(me) * dst_stride;
  std::vector<block_copy> remote;
  std::optional<block_copy> local;
  for (int j = 0; j < t.size(); ++j) {
    if (!sends_to(j)) continue;
    if (j == me) {
      if (own_to != send_block(me)) local = block_copy{own_to, send_block(me)};
    } else {
      remote.push_back({t.internals().reachable(own_to, bytes, t.pe_of(j), call), send_block(j)});
    }
  }
  exchange_with_copy_engines(t, h, stream, call, remote, local ? &*local : nullptr, bytes);
}

}  // namespace

namespace detail {
void meet_on_stream_serialized(const team_handle& h, cudaStream_t stream, const char* call) {
  launch_on_stream(false, meet_kernel, {1, 32}, stream, call, h, false);
}
}  // namespace detail

void barrier_on_stream(const team& t, cudaStream_t stream, channel_range channels) {
  meet_on_stream(t, stream, channels, true, "shoal::barrier_on_stream");
}
void sync_on_stream(const team& t, cudaStream_t stream, channel_range channels) {
  meet_on_stream(t, stream, channels, false, "shoal::sync_on_stream");
}

void broadcast_bytes_on_stream(const team& t, void* dst, const void* src, std::size_t bytes, int root,
                               cudaStream_t stream, channel_range channels) {
  constexpr const char* call = "shoal::broadcast_on_stream";
  const team_handle h = detail::stream_view(t, channels, call);
  detail::check_root(t, root, call);
  detail::check_buffer(t, dst, bytes, call, "dst");
  // src too on every member, though only the root's is read: a check the root alone made would throw there
  // while the others enqueued the kernel and waited for it.
  detail::check_buffer(t, src, bytes, call, "src");
  if (dst != src) detail::check_no_overlap(dst, bytes, src, bytes, call);
  if (bytes == 0) return;
  const algorithm algo = h.pick(collective::broadcast, bytes, algorithm::direct);
  if (detail::exchanges_with_copy_engines(t, algo, bytes)) {
    const int me = t.my_index();
    copy_engine_exchange(
        t, h, stream, call, dst, 0, bytes, [=](int) { return static_cast<const std::byte*>(src); },
        [=](int) { return me == root; });
    return;
  }
  const auto launch = detail::plan_launch(h, algo, bytes, bytes);
  detail::launch_coll(t,
                      kernel_for(h, collective::broadcast, algo, bytes, launch, broadcast_kernels),
                      launch, stream, call, h, dst, src, bytes, root);
}

void fcollect_bytes_on_stream(const team& t, void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                              channel_range channels) {
  constexpr const char* call = "shoal::fcollect_on_stream";
  const team_handle h = detail::stream_view(t, channels, call);
  const std::size_t dst_bytes = detail::team_bytes(bytes, t.size(), call);
  detail::check_buffer(t, dst, dst_bytes, call, "dst");
  detail::check_buffer(t, src, bytes, call, "src");
  // In place: this member's block already sits where it goes (every algorithm then copies it onto itself,
  // or skips it). Any other overlap is an error. Member 0's in-place src is dst itself, so it cannot tell a
  // src == dst that every member passed (an overlap on all the others, which throw) from the in-place form:
  // it runs, and waits for them until SHOAL_WAIT_TIMEOUT (coll_stream.hpp says so).
  const bool in_place = src == static_cast<const std::byte*>(dst) + std::size_t(t.my_index()) * bytes;
  if (!in_place) detail::check_no_overlap(dst, dst_bytes, src, bytes, call);
  if (bytes == 0) return;
  const algorithm algo = h.pick(collective::fcollect, bytes, algorithm::direct);
  if (detail::exchanges_with_copy_engines(t, algo, bytes)) {
    copy_engine_exchange(
        t, h, stream, call, dst, bytes, bytes, [=](int) { return static_cast<const std::byte*>(src); },
        [](int) { return true; });
    return;
  }
  const auto launch = detail::plan_launch(h, algo, bytes, dst_bytes);
  detail::launch_coll(t,
                      kernel_for(h, collective::fcollect, algo, bytes, launch, fcollect_kernels),
                      launch, stream, call, h, dst, src, bytes);
}

void alltoall_bytes_on_stream(const team& t, void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                              channel_range channels) {
  constexpr const char* call = "shoal::alltoall_on_stream";
  const team_handle h = detail::stream_view(t, channels, call);
  const std::size_t all_bytes = detail::team_bytes(bytes, t.size(), call);
  detail::check_buffer(t, dst, all_bytes, call, "dst");
  detail::check_buffer(t, src, all_bytes, call, "src");
  detail::check_no_overlap(dst, all_bytes, src, all_bytes, call);
  if (bytes == 0) return;
  const algorithm algo = h.pick(collective::alltoall, bytes, algorithm::direct);
  if (detail::exchanges_with_copy_engines(t, algo, bytes)) {
    copy_engine_exchange(
        t, h, stream, call, dst, bytes, bytes,
        [=](int j) { return static_cast<const std::byte*>(src) + std::size_t(j) * bytes; }, [](int) { return true; });
    return;
  }
  const auto launch = detail::plan_launch(h, algo, bytes, all_bytes);
  detail::launch_coll(t,
                      kernel_for(h, collective::alltoall, algo, bytes, launch, alltoall_kernels),
                      launch, stream, call, h, dst, src, bytes);
}

}  // namespace shoal
