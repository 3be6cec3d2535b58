// The shoal-perf harness: options, the per-run context (world, stream, rotated buffers, machine facts),
// result rows, and the timing and checking helpers every suite uses. Host-only and free of fmt, so the
// .cu files that hold the kernels can include it.
//
// Collective discipline: every PE of the job runs every suite and calls every helper below marked
// "collective" in the same order with the same arguments. PEs that have no part in an operation (PE 1 in a
// one-sided put, PEs >= 2 in point-to-point) still take part in the barriers and broadcasts around it.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "shoal/world.hpp"
#include "targets.hpp"

namespace shoal::perf {

// Throws std::runtime_error naming the CUDA call, file and line, with CUDA's own error text.
[[noreturn]] void cuda_failed(cudaError_t status, const char* call, const char* file, int line);

#define SHOAL_PERF_CUDA(call)                                                                        \
  do {                                                                                               \
    cudaError_t shoal_perf_status_ = (call);                                                         \
    if (shoal_perf_status_ != cudaSuccess) ::shoal::perf::cuda_failed(shoal_perf_status_, #call, __FILE__, __LINE__); \
  } while (0)

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }

// A CUDA event that cleans up after itself.
struct cuda_event {
  cudaEvent_t e = nullptr;
  cuda_event() { SHOAL_PERF_CUDA(cudaEventCreate(&e)); }
  ~cuda_event() {
    if (e != nullptr) cudaEventDestroy(e);  // cleanup path: nothing to do about a failure here
  }
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
};

struct options {
  std::string json_path;                // JSON Lines output ("" = none)
  std::string plot_dir;                 // PNGs written here after the run ("" = no plots)
  int iters = 0;                        // operations per timed batch; 0 = chosen per size (see ops_per_batch)
  int warmup = 2;                       // untimed batches before the timed ones
  int reps = 9;                         // timed batches; the row reports their median (and p10/p90)
  std::vector<std::uint64_t> sizes;     // message sizes; empty = the suite's default list
  std::vector<int> ctas;                // CTA counts for block-scope sweeps; empty = the suite's default list
  int threads = 1024;                   // threads per CTA for block-scope RMA
  bool nccl = true;                     // run NCCL side by side when the build has it
  bool nvshmem = true;                  // run NVSHMEM side by side when the build has it
  bool check = true;                    // correctness check after each timed row
  bool rotate = true;                   // rotate buffers so L2 cannot serve repeats (off: one slot)
  // Device RMA bandwidth: messages of one kernel are back to back with one quiet at the kernel's end (as
  // NVSHMEM's perftest and OSU put_bw measure), or each message is followed by quiet (latency-bound).
  bool quiet_each = false;
  // One direction of NVLink, as measured: the fastest transfer on the reference machine (2 x H200 NV18, copy
  // engine 396 GB/s; TARGETS.md's ceilings) rounded up. Not the links' nominal 450 GB/s, which no transfer
  // reaches: a figure between the two is a timing that missed work, not a result. Above it = measurement error.
  double nvlink_ceiling_gbs = 400.0;
  double local_ceiling_gbs = 4000.0;    // local HBM; above it = measurement error
};

// What happened to a row's correctness check.
enum class check_result { ok, failed, not_checked };
const char* to_string(check_result c);  // "ok", "FAILED", "-" (report.cpp)

// Per-operation times of one measurement, one sample per timed batch.
struct timing {
  double median_us = kNaN;
  double p10_us = kNaN;
  double p90_us = kNaN;
};
timing summarize(std::vector<double> per_op_us);

// One measured figure: what a suite hands to the reporter.
struct measurement {
  timing t;
  std::int64_t ops = 0;  // operations per timed batch (round trips, calls, transfers)
  check_result check = check_result::not_checked;
  std::string note;
};

// An incumbent's figure for the same operation in the same run (NCCL, NVSHMEM), beside shoal's.
struct peer_figure {
  double time_us = kNaN;
  double bandwidth_gbs = kNaN;  // the row's bandwidth measure (collectives: algorithm bandwidth)
  check_result check = check_result::not_checked;
  bool above_ceiling = false;  // set by the reporter: the bandwidth was above the row's ceiling and is dropped
};

// One line of the table and of the JSON file.
struct row {
  std::string suite;           // "p2p", "quick", ...
  std::string op;              // "put", "get", "put_on_stream", "p_pingpong", "barrier_all", "launch", ...
  std::string scope;           // "thread" | "warp" | "block" | "grid" | "stream" (host-enqueued)
  std::string algo;            // mechanism: "sm_copy", "copy_engine", "flags", "remote_atomic", ...
  std::string metric;          // "bandwidth" (GB/s of `bytes` per op) or "latency" (time per op)
  std::string what;            // what time_us means: "per op", "one-way", "round trip", "per call", ...
  int from_pe = 0, to_pe = 1;  // direction of data (-1: all PEs)
  std::uint64_t bytes = 0;
  int ctas = 0, threads = 0;
  std::int64_t ops = 0;
  timing t;
  double bandwidth_gbs = kNaN;
  peer_figure nccl;            // NCCL's same operation (send/recv beside put; collectives under graph replay)
  peer_figure nvshmem;         // NVSHMEM's same operation
  double ceiling_gbs = kNaN;   // bandwidth above this is a measurement error
  check_result check = check_result::not_checked;
  std::string status;          // "ok" | "FAILED" | "measurement error" (set by the reporter)
  std::string note;
  // rows with a target (quick): the reporter sets verdict "pass" | "miss" (or the status when not ok)
  const target* aim = nullptr;
  std::string verdict;
};

struct machine_info {
  std::string label;  // "NVIDIA H200 x2": GPU name x GPUs, "(4 PEs)" after it when PEs share them
  int gpus = 0;       // distinct GPUs among the PEs; fewer than the PEs when some share one
  std::string gpu_name;
  int sm_count = 0;
  std::uint64_t l2_bytes = 0;
};

class nccl_peer;
class nvshmem_peer;
class reporter;

// Owned by main for the whole run; every suite gets it.
class context {
 public:
  // Collective. Creates the stream, reads the device, zeroes the small symmetric word area.
  context(shoal::world& w, options opt);
  ~context();
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  shoal::world& world;
  options opt;
  int pe = 0;
  int n_pes = 1;
  cudaStream_t stream = nullptr;
  machine_info machine;
  double launch_floor_us = kNaN;
  reporter* out = nullptr;    // set by main
  nccl_peer* nccl = nullptr;  // null: no NCCL columns
  nvshmem_peer* nvshmem = nullptr;  // null: no NVSHMEM columns

  // ---- rotated buffers. Two symmetric arenas, `src` and `dst`, each at least arena_bytes long and at
  // least 2 x L2 + 64 MiB, so rotating through slots of one message size keeps L2 from serving repeats.
  // Collective: grows (frees and reallocates) when `max_message` does not fit with its guard bytes.
  void reserve(std::uint64_t max_message);
  // Bytes of one arena (src or dst) that reserve(max_message) asks the heap for.
  std::uint64_t arena_bytes_for(std::uint64_t max_message) const;
  std::byte* src() const { return src_; }
  std::byte* dst() const { return dst_; }
  std::uint64_t arena_bytes() const { return arena_bytes_; }
  // Slots of a message size: consecutive ops of one size use slot k % n_slots at byte k * slot_stride.
  static std::uint64_t slot_stride(std::uint64_t bytes);
  std::uint32_t n_slots(std::uint64_t bytes) const;

  // Small symmetric scratch: kWords 64-bit words, zero at start. Indices are fixed per use (see kWord*).
  static constexpr int kWordPingPong = 0;
  static constexpr int kWordAtomic = 1;
  static constexpr int kWordSignalOp = 2;
  static constexpr int kWordSignalWait = 3;
  static constexpr int kWordBarrierCheck = 8;  // n_pes words from here
  std::uint64_t* words() const { return words_; }
  // Device scratch (not symmetric) for kernel results: elapsed ns and error counts.
  static constexpr int kResultElapsed = 0;  // ns, written by the timing PE's kernel
  static constexpr int kResultErrors = 1;   // wrong values a kernel saw
  std::uint64_t* results() const { return results_; }
  std::uint64_t read_result(int index);  // copies results()[index] to the host (synchronous)

  // Values of flags only grow, so a flag never needs a reset: every waited value comes from here. The same
  // sequence of calls on every PE gives the same numbers everywhere.
  std::uint64_t next_sequence(std::uint64_t count);
  std::uint64_t next_seed() { return ++seed_; }

  // ---- helpers over all PEs (collective)
  void sync_stream();  // waits for this PE's stream
  void barrier();      // waits for this PE's stream, then all PEs meet (host)
  std::uint64_t broadcast(std::uint64_t value, int root);
  double broadcast(double value, int root);
  std::vector<double> max_over_pes(const std::vector<double>& values);  // element-wise
  std::uint64_t sum_over_pes(std::uint64_t value);

  // Operations per timed batch for a message size: --iters when given, else enough that a batch moves
  // about 256 MiB, between 4 and 10000.
  std::int64_t ops_per_batch(std::uint64_t bytes) const;

  // Rows that failed their check so far (the exit code).
  int failures = 0;

 private:
  std::byte* src_ = nullptr;
  std::byte* dst_ = nullptr;
  std::uint64_t arena_bytes_ = 0;
  std::uint64_t* words_ = nullptr;
  std::uint64_t* results_ = nullptr;
  std::uint64_t sequence_ = 0;
  std::uint64_t seed_ = 0x5EED;
};

// ---- timing (collective) ----------------------------------------------------------------------------------

// For each of warmup + reps batches: the PEs meet, `before_start()` (when given) puts untimed work on
// ctx.stream, `enqueue(batch)` puts one batch of work on it (PEs without a part enqueue nothing), and the
// batch is timed between two CUDA events. Returns the elapsed milliseconds of the timed batches on this PE.
std::vector<double> time_batches(context& ctx, const std::function<void(int batch)>& enqueue,
                                 const std::function<void()>& before_start = {});

// The GPU's own time per call, apart from the host's: the stream is held by a kernel until the host has
// enqueued `prologue()` and then `calls` x `enqueue_one()`, so the GPU runs the calls back to back without
// waiting for the host. gpu_us: per call, between an event after the prologue and one after the calls
// (slowest PE; a prologue of one collective call absorbs the skew between the PEs' releases). host_us: the
// host's enqueue time per call (slowest PE). ok: false when a hold gave up (the host took over a second
// to enqueue the batch, e.g. a full launch queue); then the figures are NaN. Collective.
inline constexpr int kQueuedCalls = 256;  // calls per held batch: well inside the GPU's queue of launches
struct queued_timing {
  double gpu_us = kNaN;
  double host_us = kNaN;
  bool ok = false;
};
queued_timing time_queued_calls(context& ctx, int calls, const std::function<void()>& prologue,
                                const std::function<void()>& enqueue_one);
std::string describe(const queued_timing& q);  // "queued ahead: GPU x us, host enqueue y us per call"

// Median empty-kernel launch time in microseconds: `launches` back-to-back launches of an empty kernel
// between two events, repeated ctx.opt.reps times.
double measure_launch_floor(context& ctx, int launches);
// The same empty kernels queued ahead of the GPU (time_queued_calls): the GPU's own rate, apart from the host's.
queued_timing measure_launch_floor_queued(context& ctx, int launches);

// Timing inside a kernel, for figures the launch must not count (ping-pong, barriers, atomics).
// run(warmup, iters) is collective: it runs one kernel of `warmup` untimed then `iters` timed operations
// and returns the timed part's nanoseconds (the same figure on every PE). Sizes iters so a kernel runs
// about 20 ms (or --iters), then runs warmup + reps kernels; time per operation.
inline constexpr std::uint32_t kInKernelWarmup = 16;  // operations before the clock starts
measurement time_in_kernel(context& ctx, const std::function<double(std::uint32_t warmup, std::uint32_t iters)>& run);

// ---- correctness (collective) -------------------------------------------------------------------------

// One data movement to check: `bytes` from `src` on source_pe land in `dst` on target_pe.
struct transfer {
  int source_pe;
  const std::byte* src;
  int target_pe;
  std::byte* dst;
  std::uint64_t bytes;
};

// Fills every transfer's source with a fresh seeded pattern, fills its target and 64 guard bytes after it
// with a poison value, meets, runs `op` (on every PE; each does its part and waits for its own device
// work), meets, then checks on each target PE that the target holds the pattern and the guard bytes are
// untouched. Returns ok only if every transfer arrived whole on every PE.
inline constexpr std::uint64_t kGuardBytes = 64;
check_result check_transfers(context& ctx, std::span<const transfer> transfers, const std::function<void()>& op);

// Wall-clock helpers for the report header.
std::string utc_now_iso();

}  // namespace shoal::perf
