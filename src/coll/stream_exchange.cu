// On-stream barrier, sync, broadcast, fcollect and alltoall: one grid-scope kernel each.
#include "coll/stream_common.hpp"
#include "shoal/dev/coll.cuh"

namespace shoal {
namespace {

__global__ void meet_kernel(team_handle t, bool quiet_first) {
  detail::await_previous_kernel();
  if (quiet_first)
    barrier(block, t);
  else
    sync(block, t);
}

__global__ void __launch_bounds__(detail::kCollThreads) broadcast_kernel(team_handle t, void* dst, const void* src, std::size_t bytes, int root) {
  detail::await_previous_kernel();
  broadcast_bytes(grid, t, dst, src, bytes, root);
}
__global__ void __launch_bounds__(detail::kCollThreads) fcollect_kernel(team_handle t, void* dst, const void* src, std::size_t bytes) {
  detail::await_previous_kernel();
  fcollect_bytes(grid, t, dst, src, bytes);
}
__global__ void __launch_bounds__(detail::kCollThreads) alltoall_kernel(team_handle t, void* dst, const void* src, std::size_t bytes) {
  detail::await_previous_kernel();
  alltoall_bytes(grid, t, dst, src, bytes);
}

void meet_on_stream(const team& t, cudaStream_t stream, channel_range channels, bool quiet_first, const char* call) {
  const team_handle h = detail::stream_view(t, channels, call);
  detail::launch_coll(t, meet_kernel, {1, 32}, stream, call, h, quiet_first);
}

}  // namespace

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
  if (t.my_index() == root) {
    detail::check_buffer(t, src, bytes, call, "src");
    if (dst != src) detail::check_no_overlap(dst, bytes, src, bytes, call);
  }
  if (bytes == 0) return;
  const auto launch =
      detail::plan_launch(h, h.pick(collective::broadcast, bytes, algorithm::direct), bytes, bytes);
  detail::launch_coll(t, broadcast_kernel, launch, stream, call, h, dst, src, bytes, root);
}

void fcollect_bytes_on_stream(const team& t, void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                              channel_range channels) {
  constexpr const char* call = "shoal::fcollect_on_stream";
  const team_handle h = detail::stream_view(t, channels, call);
  detail::check_buffer(t, dst, bytes * t.size(), call, "dst");
  detail::check_buffer(t, src, bytes, call, "src");
  detail::check_no_overlap(dst, bytes * t.size(), src, bytes, call);
  if (bytes == 0) return;
  const auto launch =
      detail::plan_launch(h, h.pick(collective::fcollect, bytes, algorithm::direct), bytes, bytes * t.size());
  detail::launch_coll(t, fcollect_kernel, launch, stream, call, h, dst, src, bytes);
}

void alltoall_bytes_on_stream(const team& t, void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                              channel_range channels) {
  constexpr const char* call = "shoal::alltoall_on_stream";
  const team_handle h = detail::stream_view(t, channels, call);
  detail::check_buffer(t, dst, bytes * t.size(), call, "dst");
  detail::check_buffer(t, src, bytes * t.size(), call, "src");
  detail::check_no_overlap(dst, bytes * t.size(), src, bytes * t.size(), call);
  if (bytes == 0) return;
  const auto launch =
      detail::plan_launch(h, h.pick(collective::alltoall, bytes, algorithm::direct), bytes, bytes * t.size());
  detail::launch_coll(t, alltoall_kernel, launch, stream, call, h, dst, src, bytes);
}

}  // namespace shoal
