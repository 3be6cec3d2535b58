// The figures shoal must reach (docs: TARGETS.md), in one table, for `shoal-perf quick` and the suites that
// print a target beside a row. Absolute figures are guides from one machine (2 x H200, NV18): each row is
// read beside NCCL in the same run where NCCL has the operation.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace shoal::perf {

// What a row is judged on: its bandwidth (bytes / time), its bus bandwidth (collectives: NCCL's
// convention, see bus_factor in report.hpp), its time, or its time over NCCL's in the same run.
enum class goal { at_least_gbs, at_least_busbw_gbs, at_most_us, at_most_nccl_time };

// The collectives' on-stream time targets assume this launch floor; where a run's floor is higher they shift
// by the difference (TARGETS.md, collectives). barrier_on_stream does not shift: TARGETS.md sets it below any
// such floor on purpose (<= 3 us, "stream memory operations need no kernel launch"), so a barrier bound by
// kernel launches is meant to miss it.
inline constexpr double kTargetLaunchFloorUs = 4.0;

// The PE count a target holds for: any (point-to-point, PE 0 -> PE 1 moves the same data whatever the job's
// size), or 2 (TARGETS.md's collectives and barriers, operations of all PEs: at another count the row is
// measured but not judged).
inline constexpr int kAnyPes = 0;
inline constexpr int kTwoPes = 2;

struct target {
  std::string_view key;
  std::string_view metric;     // as TARGETS.md words it
  goal kind;
  double value;
  std::string_view reference;  // the incumbent on the reference machine, for the reader
  int pes = kAnyPes;           // the PE count the figure holds for (kAnyPes or kTwoPes)
};

inline constexpr target kTargets[] = {
    // point-to-point, PE 0 -> PE 1
    {"put_256M_32", "put bandwidth, 256 MiB, 32 CTAs", goal::at_least_gbs, 360, "NVSHMEM 359 GB/s"},
    {"put_256M_16to132", "put bandwidth, 256 MiB, any CTA count 16..132", goal::at_least_gbs, 340, "NVSHMEM 216 GB/s at 132"},
    {"put_1M", "put bandwidth, 1 MiB", goal::at_least_gbs, 330, "NVSHMEM 327 GB/s (32 CTAs)"},
    {"put_64K", "put bandwidth, 64 KiB", goal::at_least_gbs, 180, "NVSHMEM 146 GB/s"},
    {"get_256M", "get bandwidth, 256 MiB, any CTA count 16..132", goal::at_least_gbs, 360, "NVSHMEM 366 at 32, 125 at 132"},
    {"put_on_stream_256M", "host-initiated put on a stream, 256 MiB", goal::at_least_gbs, 385, "copy engine ceiling 396 GB/s"},
    {"p_one_way", "p ping-pong, one-way", goal::at_most_us, 0.75, "NVSHMEM 1.24 us"},
    {"put_signal_8B_thread", "put_signal 8 B ping-pong, one-way (thread)", goal::at_most_us, 1.0, "NVSHMEM 2.07 us"},
    {"put_signal_4K_warp", "put_signal 4 KiB ping-pong, one-way (warp)", goal::at_most_us, 1.6, "NVSHMEM 3.42 us"},
    {"fetch_add_round_trip", "remote atomic_fetch_add round trip", goal::at_most_us, 1.5, "-"},
    {"barrier_on_stream", "barrier_all on a stream", goal::at_most_us, 3.0, "NVSHMEM 4.3-5.3 us", kTwoPes},
    {"barrier_in_kernel", "barrier_all inside a kernel (block), per barrier", goal::at_most_us, 1.5, "NVSHMEM 3.27 us", kTwoPes},
    // collectives, 2 PEs, bfloat16 sum (for the coll suite; on-stream times shift with the launch floor)
    {"allreduce_4K", "all-reduce 4 KiB, on stream", goal::at_most_us, 5.0, "floor + 1 us; NCCL graph 11.6-17.6 us", kTwoPes},
    {"allreduce_4K_graph", "all-reduce 4 KiB, on stream under CUDA graph replay", goal::at_most_us, 3.0, "NCCL graph 11.6-17.6 us", kTwoPes},
    {"allreduce_4K_vs_nccl", "all-reduce 4 KiB, on stream, time / NCCL's (graph) in the same run", goal::at_most_nccl_time, 0.4, "-", kTwoPes},
    {"allreduce_256K", "all-reduce 256 KiB", goal::at_most_us, 7.0, "NVSHMEM 10.0-12.1 us", kTwoPes},
    {"allreduce_1M", "all-reduce 1 MiB", goal::at_most_us, 9.0, "NVSHMEM 14.0 us", kTwoPes},
    {"allreduce_64M_busbw", "all-reduce 64 MiB, bus bandwidth", goal::at_least_busbw_gbs, 330, "NCCL 269 GB/s", kTwoPes},
    {"allreduce_256M_busbw", "all-reduce 256 MiB, bus bandwidth", goal::at_least_busbw_gbs, 350, "NCCL 301 GB/s", kTwoPes},
    {"allreduce_grid_4K", "all-reduce in a kernel, grid scope, 4 KiB", goal::at_most_us, 2.0, "n/a", kTwoPes},
    {"allreduce_block_1M", "all-reduce in a kernel, one block, 1 MiB", goal::at_least_gbs, 60, "NVSHMEM 1.5 GB/s", kTwoPes},
    {"alltoall_1M", "alltoall 1 MiB per PE", goal::at_most_us, 10.0, "NVSHMEM 15.1 us", kTwoPes},
    {"alltoall_64M", "alltoall 64 MiB per PE, bytes moved incl. local / time", goal::at_least_gbs, 650, "NVSHMEM 525 GB/s", kTwoPes},
    {"fcollect_1M", "fcollect 1 MiB per PE", goal::at_most_us, 10.0, "NVSHMEM 16.3 us", kTwoPes},
    {"broadcast_1M", "broadcast 1 MiB", goal::at_most_us, 8.0, "NVSHMEM 11.3 us", kTwoPes},
};

// The target of `key`; a missing key is a bug in the suite that asks.
inline const target& find_target(std::string_view key) {
  for (const target& t : kTargets)
    if (t.key == key) return t;
  throw std::logic_error("shoal-perf: no target named " + std::string(key));
}

}  // namespace shoal::perf
