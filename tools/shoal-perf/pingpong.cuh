// The ping-pong loop of the latency rows, shared by shoal's kernel and the NVSHMEM peer's, so that the
// two differ only in their calls.
#pragma once

#include <cstdint>

#include "shoal/dev/detail/spin.cuh"  // detail::global_timer_ns

namespace shoal::perf {

// Round trip i carries the value first + i + 1: the initiator sends it and awaits it back, the other side
// awaits it and sends it back. Returns the nanoseconds of the round trips after the first `warmup`.
template <typename Send, typename Await>
__device__ inline std::uint64_t pingpong_loop(std::uint64_t first, std::uint32_t warmup, std::uint32_t iters,
                                              bool initiator, Send send, Await await) {
  std::uint64_t t0 = 0;
  for (std::uint32_t i = 0; i < warmup + iters; ++i) {
    if (i == warmup) t0 = detail::global_timer_ns();
    const std::uint64_t v = first + i + 1;
    if (initiator) {
      send(v);
      await(v);
    } else {
      await(v);
      send(v);
    }
  }
  return detail::global_timer_ns() - t0;
}

}  // namespace shoal::perf
