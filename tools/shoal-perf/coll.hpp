// The collectives suite's measurements (`shoal-perf coll`, the collective rows of `quick`, `calibrate`):
// shoal's collectives on the world team, each called four ways (back to back on a stream, under CUDA graph
// replay, and back to back inside one kernel at grid and at block scope), timed, and checked against a host
// reference on random data. Host-only and fmt-free, so the .cu file with the kernels can include it.
//
// Sizes. A case's `bytes` is OpenSHMEM's nelems x element size, what team_handle::pick is asked with:
// reduce and broadcast, the buffer; fcollect, each PE's contribution; alltoall, one block (PE to PE);
// reducescatter, each PE's result block. Bandwidth follows nccl-tests: algbw = size / time with size the
// buffer (reduce, broadcast), the gathered output (fcollect: n x bytes), each PE's whole send buffer
// (alltoall: n x bytes, own block included: "bytes moved incl. local") or the reduce-scatter input (n x
// bytes); the reporter turns it into bus bandwidth (bus_factor in report.hpp).
//
// Collective discipline as in harness.hpp: every PE calls every function here in the same order with the
// same arguments.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness.hpp"
#include "shoal/coll_model.hpp"
#include "shoal/team_handle.hpp"

namespace shoal::perf {

// How a collective is called: on a stream (a loop of calls), on a stream under CUDA graph replay, or
// inside one kernel N times at grid scope or at block scope (one CTA); grid_ll is grid scope with
// shoal::ll_only (LL alone compiled, at every size; not the barrier).
enum class coll_mode { stream, graph, grid, block, grid_ll };
const char* to_string(coll_mode m);

inline constexpr collective kCollOrder[] = {collective::reduce,   collective::reducescatter, collective::fcollect,
                                            collective::alltoall, collective::broadcast,     collective::barrier};
// The modes `coll` runs unless --modes names others; --modes also takes grid_ll.
inline constexpr coll_mode kCollModes[] = {coll_mode::stream, coll_mode::graph, coll_mode::grid, coll_mode::block};
inline constexpr coll_mode kCollAllModes[] = {coll_mode::stream, coll_mode::graph, coll_mode::grid, coll_mode::block,
                                              coll_mode::grid_ll};

// The reductions run on bfloat16 with sum (one kernel instantiation per collective and scope).
inline constexpr std::uint64_t kCollElemBytes = 2;
inline constexpr const char* kCollElemName = "bfloat16";
inline constexpr int kBroadcastRoot = 0;
inline constexpr int kCollGridThreads = 512;    // grid scope: threads per CTA, as the on-stream kernels
inline constexpr int kCollBlockThreads = 1024;  // block scope: the one CTA
// Block scope (one CTA for the whole message) stops here by default: beyond, a row takes seconds.
inline constexpr std::uint64_t kCollBlockMaxBytes = 256ull << 20;

// Options of the coll and calibrate suites (set by main from the command line).
struct coll_options {
  std::vector<collective> colls;  // empty: all
  std::vector<coll_mode> modes;   // empty: all
  std::string calibrate_path;     // calibrate: the table file to write ("" = print only)
};
coll_options& coll_settings();

// The name shoal-perf uses for a collective ("reduce", ...), as to_string(collective).
std::string coll_name(collective op);

std::uint64_t coll_src_bytes(collective op, std::uint64_t bytes, int n_pes);     // what one PE's src holds
std::uint64_t coll_dst_bytes(collective op, std::uint64_t bytes, int n_pes);     // what one PE's dst holds
std::uint64_t coll_size_bytes(collective op, std::uint64_t bytes, int n_pes);    // nccl-tests' size (algbw)
std::uint64_t coll_buffer_bytes(collective op, std::uint64_t bytes, int n_pes);  // max of src and dst
// Reductions need a whole number of elements; every other size is valid (barrier: any).
bool coll_size_valid(collective op, std::uint64_t bytes);

// The algorithm a call of `op` on `bytes` runs with handle `h` (the model's pick, or the forced one).
algorithm coll_pick(const team_handle& h, collective op, std::uint64_t bytes);
// The same for a call by one block, whose one unit takes all `bytes`: where that share needs too many
// scratch steps for the pick, the device runs the large algorithm instead (team_handle::keeps_algorithm).
algorithm coll_pick_one_block(const team_handle& h, collective op, std::uint64_t bytes);

// The CTAs and threads per CTA of the kernel that an on-stream call of `op` on `bytes` running `algo`
// launches: the library's plan_launch, given the sizes the on-stream forms give it.
struct launch_shape {
  int ctas = 0, threads = 0;
};
launch_shape coll_launch_shape(const team_handle& h, collective op, algorithm algo, std::uint64_t bytes, int n_pes);

// Operations per timed batch: --iters, else enough that a batch moves about 1 GiB, between 4 and 1000
// (small calls: 1000 back to back).
std::int64_t coll_ops(const context& ctx, std::uint64_t bytes);

struct coll_case {
  collective op = collective::reduce;
  std::uint64_t bytes = 0;  // OpenSHMEM bytes (see above); ignored by barrier
  coll_mode mode = coll_mode::stream;
  std::optional<algorithm> force;  // in-kernel modes only: team_handle::with_algorithm
};

struct coll_result {
  measurement m;                         // time per call (the slowest PE), ops per batch, check
  algorithm algo = algorithm::one_shot;  // what the calls ran
  int ctas = 0, threads = 0;             // launch shape of the loop kernel, or of each on-stream call's kernel
  bool copy_engines = false;             // on-stream calls whose data the copy engines move, not a kernel
};

// Collective. Times `c` (warm-up + reps batches, buffers rotated unless --no-rotate), then checks one
// call against the host reference (unless --no-check).
coll_result measure_coll(context& ctx, const coll_case& c);
coll_result measure_coll_on_stream(context& ctx, const coll_case& c);  // stream and graph (coll_measure.cpp)
coll_result measure_coll_in_kernel(context& ctx, const coll_case& c);  // grid and block (coll_kernels.cu)

// A row for the table and the JSON; NCCL's figure (under graph replay) or NVSHMEM's beside it.
row coll_row(const context& ctx, const coll_case& c, const coll_result& r);
void attach_nccl_coll(const context& ctx, row& r, collective op, const measurement& nccl);
void attach_nvshmem_coll(const context& ctx, row& r, collective op, const measurement& nvshmem);

// ---- timing and graphs (coll_measure.cpp) ---------------------------------------------------------------

// For each of warm-up + reps batches: the PEs meet on the host, then on the device (a barrier on the
// stream, so every PE's batch starts within a flag's latency of the others and launch skew is not timed),
// and the batch `enqueue(batch)` puts on ctx.stream is timed between two events. Returns microseconds
// per operation of each timed batch, the slowest PE's.
std::vector<double> time_coll_batches(context& ctx, std::int64_t ops, const std::function<void(int)>& enqueue);

// Collective: captures enqueue(k), k < calls, on ctx.stream into a graph (capture mode thread-local, so a
// call that cannot be captured fails here). ok() is true only if every PE captured; otherwise error()
// says why (this PE's reason, or which PE failed) and the graph must not be launched.
class coll_graph {
 public:
  coll_graph(context& ctx, std::int64_t calls, const std::function<void(std::int64_t)>& enqueue);
  ~coll_graph();
  coll_graph(const coll_graph&) = delete;
  coll_graph& operator=(const coll_graph&) = delete;
  bool ok() const { return exec_ != nullptr; }
  const std::string& error() const { return error_; }
  void launch(cudaStream_t stream) const;

 private:
  cudaGraphExec_t exec_ = nullptr;
  std::string error_;
};

// Collective: the graphs a graph-mode row replays, one per timed or warm-up batch. Graph b holds the
// calls the stream loop's batch b makes (call k on slot (b x calls + k) mod n_slots), so consecutive
// replays rotate over the buffers as the loop's batches do: one graph replayed over and over would find a
// small size's buffers in L2 (60 MiB on an H200) and time them warm. Batches whose slots repeat share a
// graph (with --no-rotate, one). ok() and error() as coll_graph's, for the first graph that failed.
class coll_batch_graphs {
 public:
  coll_batch_graphs(context& ctx, std::int64_t calls, std::uint32_t n_slots,
                    const std::function<void(std::uint64_t slot)>& enqueue);
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::size_t size() const { return graphs_.size(); }
  void launch(int batch, cudaStream_t stream) const;  // the graph of `batch` (time_batches' index)

 private:
  std::vector<std::unique_ptr<coll_graph>> graphs_;
  std::string error_;
};

// ---- correctness (coll_measure.cpp, coll_kernels.cu) -----------------------------------------------------

struct coll_check_outcome {
  check_result result = check_result::not_checked;
  std::string note;  // the first wrong value seen, and on which PE
};

// Collective. Fills slot 0 of every PE's src (ctx.src()) with fresh seeded random data (reductions:
// non-zero bfloat16 values whose sums are exact in any order; the rest: non-zero bytes), poisons dst
// (ctx.dst()) and 64 guard bytes after it, meets, runs `run` (one call on slot 0, waited for), meets,
// and compares every PE's dst with the reference computed on the host from every PE's data.
coll_check_outcome check_coll(context& ctx, collective op, std::uint64_t bytes, const std::function<void()>& run);

// Collective. `rounds` times: each PE stores a fresh value into its word on the next PE, runs
// `barrier_once` (enqueues one barrier on ctx.stream), then checks the word the previous PE wrote holds
// that round's value (or the next round's: the previous PE may be ahead).
coll_check_outcome check_barrier_on_stream(context& ctx, int rounds, const std::function<void()>& barrier_once);

// ---- calibration helpers (coll_kernels.cu) ---------------------------------------------------------------

// Local device-to-device copies of `bytes` (cudaMemcpyAsync) back to back; time per copy.
measurement measure_local_copy(context& ctx, std::uint64_t bytes);

// Bytes of symmetric heap this PE can still give the two arenas (min over PEs): what the heap may grow
// to, and what the GPU has free, less a headroom for NCCL and graphs.
std::uint64_t coll_heap_room(context& ctx);
// What context::reserve(buffer) makes the two arenas take together.
std::uint64_t coll_arenas_bytes(const context& ctx, std::uint64_t buffer);

}  // namespace shoal::perf
