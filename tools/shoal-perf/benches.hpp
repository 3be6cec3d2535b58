// The measurements the suites are made of. Each is collective (every PE calls it, in the same order, with
// the same arguments) and returns the per-operation timing on every PE; the figures are PE 0's (or the
// slowest PE's, where every PE times its own part, as for barriers). Data moves PE 0 -> PE 1 (put) or
// PE 1 -> PE 0 (get): callers make sure n_pes >= 2.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "harness.hpp"
#include "shoal/types.hpp"

namespace shoal::perf {

enum class rma_dir { put, get };
enum class scope_kind { thread, warp, block, grid };
const char* to_string(rma_dir d);
const char* to_string(scope_kind s);

// ---- bandwidth (p2p_suite.cu) ---------------------------------------------------------------------------

struct rma_case {
  rma_dir dir = rma_dir::put;
  scope_kind scope = scope_kind::block;
  std::uint64_t bytes = 0;
  int ctas = 1;
  int threads = 1024;  // per CTA; a multiple of 32 for warp scope
};

// A kernel of `ctas` x `threads` on PE 0; the message is cut into one contiguous slice per scope instance
// (CTA, warp or thread), each moved with put_nbi/get_nbi. Small messages repeat inside one kernel (slot
// after slot), back to back with one quiet at the end (or quiet after each, with opt.quiet_each); large
// ones take one kernel each. Time per message.
measurement measure_device_rma(context& ctx, const rma_case& c);

// How measure_device_rma batches one size: `inner` messages per kernel (small messages repeat inside one
// kernel, slot after slot), `launches` kernels per timed batch.
struct rma_batch {
  std::uint32_t inner;
  std::int64_t launches;
};
rma_batch plan_rma_batch(const context& ctx, const rma_case& c);

// The transfer a check of `dir` verifies: put moves PE 0's src to PE 1's dst, get PE 1's src to PE 0's dst.
transfer rma_transfer(const context& ctx, rma_dir dir, std::uint64_t bytes);

// Microseconds per operation of each timed batch, from time_batches' milliseconds.
std::vector<double> per_op_us(const std::vector<double>& batch_ms, std::int64_t ops);

// put_on_stream / get_on_stream (copy engine) from PE 0, back to back on one stream. Time per call.
measurement measure_stream_rma(context& ctx, rma_dir dir, std::uint64_t bytes);

// ---- latency (latency_suite.cu) -------------------------------------------------------------------------

enum class pingpong_kind { p, put_signal };

// Ping-pong between PE 0 and PE 1 inside one kernel on each (one thread, or one warp). `p`: an 8-byte
// flag stored with p and awaited with wait_until. put_signal: `bytes` of data plus the signal, awaited with
// signal_wait_until. Time per round trip (one-way is half).
measurement measure_pingpong(context& ctx, pingpong_kind kind, scope_kind scope, std::uint64_t bytes);

// PE 0 does dependent atomic_fetch_add on a word of PE 1, one thread. Time per fetch_add (a round trip).
measurement measure_fetch_add(context& ctx);

// barrier_all_on_stream back to back on every PE. Time per call (slowest PE).
measurement measure_barrier_on_stream(context& ctx);

// signal_op_on_stream with `op` back to back on every PE, each into the next PE's word. Time per call
// (slowest PE); checked by seeded values each word must end at (their sum, or the last one set).
measurement measure_signal_op_on_stream(context& ctx, shoal::sig_op op);

// Back to back on every PE: a signal add of 1 into the next PE's word, then signal_wait_until_on_stream
// (cmp::ge) until this PE's word counts the call, so the PEs step together. Time per call (slowest PE).
measurement measure_signal_wait_on_stream(context& ctx);

// barrier_all(block, h) back to back inside one kernel on every PE. Time per barrier (slowest PE).
measurement measure_barrier_in_kernel(context& ctx);

// ---- the drivers of those latency figures (latency_suite.cu), shared with the NVSHMEM peer -------------
// Each takes the launch of one kernel on ctx.stream (what differs between libraries) and does the rest the
// same way: meetings, sequence values, in-kernel clock, results and checks. A kernel writes its timed
// nanoseconds to ctx.results()[kResultElapsed] and the wrong values it saw to [kResultErrors].

// Launches one kernel of `warmup` untimed and `iters` timed operations, whose values start after `first`.
using timed_launch = std::function<void(std::uint64_t first, std::uint32_t warmup, std::uint32_t iters)>;
// The same, checking what it sees when `check` is set.
using checked_launch = std::function<void(std::uint64_t first, std::uint32_t warmup, std::uint32_t iters, bool check)>;

// Collective: one ping-pong kernel on PE 0 and PE 1; PE 0's timed nanoseconds, on every PE.
double pingpong_round(context& ctx, const timed_launch& launch, std::uint32_t warmup, std::uint32_t iters);
// PE 0's kernel of dependent fetch_adds on PE 1's `word`, zeroed before each kernel; checked by the kernel
// and by the word's final count.
measurement time_fetch_add(context& ctx, std::uint64_t* word, const timed_launch& launch);
// `one_call()` back to back on every PE's stream (--iters, default 1000 a batch); time per call, the slowest PE.
measurement time_calls_on_stream(context& ctx, const std::function<void()>& one_call);
// A barrier kernel on every PE; time per barrier, the slowest PE; checked with 100 rounds.
measurement time_barrier_in_kernel(context& ctx, const checked_launch& launch);

}  // namespace shoal::perf
