// The suites of shoal-perf (subcommands) and the row builders they share. A suite is a collective
// function over the context: it measures and hands rows to ctx.out. Adding one is one entry in kSuites
// (main.cpp) and one function.
#pragma once

#include <functional>
#include <string_view>

#include "benches.hpp"
#include "harness.hpp"
#include "nccl_peer.hpp"
#include "nvshmem_peer.hpp"
#include "report.hpp"

namespace shoal::perf {

struct suite {
  std::string_view name;
  std::string_view summary;
  int min_pes;       // fewer PEs: the suite is skipped with a reason (exit 0)
  bool wants_nccl;   // open an NCCL communicator for side-by-side columns
  bool wants_nvshmem;  // start NVSHMEM for side-by-side columns
  void (*run)(context& ctx);
};

void run_p2p(context& ctx);        // p2p.cpp
void run_quick(context& ctx);      // quick.cpp
void run_coll(context& ctx);       // coll.cpp
void run_calibrate(context& ctx);  // coll_calibrate.cpp

// ---- row builders (p2p.cpp) ---------------------------------------------------------------------------

// GB/s of `bytes` moved in `us` microseconds.
double gbs(std::uint64_t bytes, double us);

row device_rma_row(const context& ctx, const rma_case& c, const measurement& m);
row stream_rma_row(const context& ctx, rma_dir dir, std::uint64_t bytes, const measurement& m);
// NCCL's figure for the same bytes, beside a put row.
void attach_nccl(row& r, const measurement& nccl);
// NVSHMEM's figure for the same operation, beside a point-to-point row (a ping-pong's through one_way).
void attach_nvshmem(row& r, const measurement& nvshmem);
// Runs `attach(peer)` when this run has NVSHMEM. NVSHMEM is only the comparison: when it fails (its heap
// cannot hold the buffers, say), the row keeps shoal's figure and its note says why.
row with_nvshmem(context& ctx, row r, const std::function<void(nvshmem_peer&, row&)>& attach);
// NVSHMEM's block-scope put or get of the row's size and CTA shape (a put or get row).
row with_nvshmem_rma(context& ctx, row r);
// A ping-pong's round trip as one way (every time / 2).
measurement one_way(const measurement& round_trip);
// Ping-pong: time_us is one-way (round trip / 2).
row pingpong_row(pingpong_kind kind, scope_kind scope, std::uint64_t bytes, const measurement& m);
row fetch_add_row(const measurement& m);
row barrier_row(bool on_stream, const measurement& m);
// The latency rows measured, with NVSHMEM's same call beside them when the run has it.
row measured_pingpong_row(context& ctx, pingpong_kind kind, scope_kind scope, std::uint64_t bytes);
row measured_fetch_add_row(context& ctx);
row measured_barrier_row(context& ctx, bool on_stream);

}  // namespace shoal::perf
