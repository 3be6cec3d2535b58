// Latency of point-to-point synchronization and of barriers: ping-pong with p and with put_signal, remote
// fetch_add round trips, barrier_all inside a kernel and on a stream, signal adds on a stream.
//
// In-kernel figures are timed inside the kernel with %globaltimer (ns) after a few warm-up round trips, so
// neither launch latency nor the skew between the PEs' launches is counted. Stream figures use events.
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "benches.hpp"
#include "coll.hpp"
#include "pingpong.cuh"
#include "shoal/device.cuh"
#include "shoal/stream.hpp"

namespace shoal::perf {
namespace {

// ---- ping-pong -----------------------------------------------------------------------------------------

struct pingpong_args {
  std::byte* dst;            // symmetric: the peer's copy receives our data
  const std::byte* src;
  std::uint64_t bytes;       // put_signal only
  std::uint64_t* word;       // symmetric flag: the peer sets ours, we set the peer's
  std::uint64_t first;       // round trip i carries value first + i + 1 (values only grow: no reset)
  std::uint32_t warmup, iters;
  int peer;
  int initiator;             // PE 0 sends first and keeps the time
  int use_put_signal;        // 0: p + wait_until on the word; 1: put_signal + signal_wait_until
  std::uint64_t* elapsed_ns;
};

// The exact value is awaited (cmp::eq): a round trip only completes if the peer saw this round's value,
// which is a check in itself. A p is not followed by quiet, as in NVSHMEM's shmem_p ping-pong: the store
// reaches the peer without it on this hardware, and quiet would add a full completion wait per message.
template <typename Scope>
__global__ void pingpong_kernel(shoal::device_handle h, pingpong_args a) {
  constexpr Scope scope{};
  auto send = [&](std::uint64_t v) {
    if (a.use_put_signal) shoal::put_signal(scope, h, a.dst, a.src, a.bytes, a.word, v, shoal::sig_op::set, a.peer);
    else if (Scope::leader()) shoal::p(h, a.word, v, a.peer);
  };
  auto await = [&](std::uint64_t v) { shoal::wait_until(scope, h, a.word, shoal::cmp::eq, v); };
  const std::uint64_t ns = pingpong_loop(a.first, a.warmup, a.iters, a.initiator, send, await);
  if (a.initiator && Scope::leader()) *a.elapsed_ns = ns;
}

// ---- atomics -------------------------------------------------------------------------------------------

// Each fetch_add's operand depends on the previous result (it is always 1, which the compiler cannot
// know), so the round trips cannot overlap. The word on `peer` starts at 0; every result is checked.
__global__ void fetch_add_kernel(shoal::device_handle h, std::uint64_t* word, int peer, std::uint32_t warmup,
                                 std::uint32_t iters, std::uint64_t* elapsed_ns, std::uint64_t* errors) {
  std::uint64_t add = 1, expect = 0, bad = 0, t0 = 0;
  for (std::uint32_t i = 0; i < warmup + iters; ++i) {
    if (i == warmup) t0 = detail::global_timer_ns();
    const std::uint64_t got = shoal::atomic_fetch_add(h, word, add, peer);
    bad += got != expect;
    expect += 1;
    add = 1 + (got >> 63);
  }
  *elapsed_ns = detail::global_timer_ns() - t0;
  *errors = bad;
}

// ---- barriers ------------------------------------------------------------------------------------------

// With `check`, before barrier i each PE stores first + i + 1 into its slot on the next PE; after the
// barrier the slot written by the previous PE must hold that value (or the next one: that PE may already
// be past this barrier and into the next round).
__global__ void barrier_kernel(shoal::device_handle h, std::uint32_t warmup, std::uint32_t iters, std::uint64_t* slots,
                               std::uint64_t first, int check, std::uint64_t* elapsed_ns, std::uint64_t* errors) {
  const int next = (h.pe + 1) % h.n_pes, prev = (h.pe + h.n_pes - 1) % h.n_pes;
  std::uint64_t t0 = 0, bad = 0;
  for (std::uint32_t i = 0; i < warmup + iters; ++i) {
    if (i == warmup) t0 = detail::global_timer_ns();
    const std::uint64_t v = first + i + 1;
    if (check && shoal::block_scope::leader()) shoal::p(h, slots + h.pe, v, next);
    shoal::barrier_all(shoal::block, h);
    if (check && shoal::block_scope::leader()) {
      const std::uint64_t seen = *static_cast<volatile std::uint64_t*>(slots + prev);
      bad += seen != v && seen != v + 1;
    }
  }
  if (shoal::block_scope::leader()) {
    *elapsed_ns = detail::global_timer_ns() - t0;
    *errors = bad;
  }
}

}  // namespace

// ---- drivers, shared with the NVSHMEM peer (benches.hpp) ---------------------------------------------------

double pingpong_round(context& ctx, const timed_launch& launch, std::uint32_t warmup, std::uint32_t iters) {
  const std::uint64_t first = ctx.next_sequence(warmup + iters);
  ctx.barrier();
  if (ctx.pe < 2) {
    launch(first, warmup, iters);
    SHOAL_PERF_CUDA(cudaGetLastError());
  }
  ctx.barrier();
  const double ns = ctx.pe == 0 ? static_cast<double>(ctx.read_result(context::kResultElapsed)) : 0.0;
  return ctx.broadcast(ns, 0);
}

measurement time_fetch_add(context& ctx, std::uint64_t* word, const timed_launch& launch) {
  std::uint64_t errors = 0;
  std::uint64_t last_total = 0;
  auto run = [&](std::uint32_t warmup, std::uint32_t iters) {
    if (ctx.pe == 1) SHOAL_PERF_CUDA(cudaMemsetAsync(word, 0, sizeof *word, ctx.stream));
    ctx.barrier();
    if (ctx.pe == 0) {
      launch(0, warmup, iters);
      SHOAL_PERF_CUDA(cudaGetLastError());
    }
    ctx.barrier();
    double ns = 0;
    if (ctx.pe == 0) {
      ns = static_cast<double>(ctx.read_result(context::kResultElapsed));
      errors += ctx.read_result(context::kResultErrors);
    }
    last_total = warmup + iters;
    return ctx.broadcast(ns, 0);
  };
  measurement m = time_in_kernel(ctx, run);
  // The results seen on PE 0 were each checked in the kernel; PE 1's word must hold the count of the last run.
  std::uint64_t final_value = 0;
  if (ctx.pe == 1) {
    SHOAL_PERF_CUDA(cudaMemcpyAsync(&final_value, word, sizeof final_value, cudaMemcpyDeviceToHost, ctx.stream));
    ctx.sync_stream();
  }
  final_value = ctx.broadcast(final_value, 1);
  errors = ctx.broadcast(errors, 0);
  m.check = errors == 0 && final_value == last_total ? check_result::ok : check_result::failed;
  return m;
}

measurement time_calls_on_stream(context& ctx, const std::function<void()>& one_call) {
  const int calls = ctx.opt.iters > 0 ? ctx.opt.iters : 1000;
  std::vector<double> ms = time_batches(ctx, [&](int) {
    for (int i = 0; i < calls; ++i) one_call();
  });
  measurement m;
  m.ops = calls;
  m.t = summarize(per_op_us(ctx.max_over_pes(ms), calls));
  m.note = "slowest PE";
  return m;
}

measurement time_barrier_in_kernel(context& ctx, const checked_launch& launch) {
  auto run_kernel = [&](std::uint32_t warmup, std::uint32_t iters, bool check) {
    const std::uint64_t first = ctx.next_sequence(warmup + iters);
    ctx.barrier();
    launch(first, warmup, iters, check);
    SHOAL_PERF_CUDA(cudaGetLastError());
    ctx.barrier();
  };
  auto run = [&](std::uint32_t warmup, std::uint32_t iters) {
    run_kernel(warmup, iters, false);
    return ctx.max_over_pes({static_cast<double>(ctx.read_result(context::kResultElapsed))})[0];
  };
  measurement m = time_in_kernel(ctx, run);
  m.note = "slowest PE";
  if (ctx.opt.check) {
    run_kernel(0, 100, true);
    m.check = ctx.sum_over_pes(ctx.read_result(context::kResultErrors)) == 0 ? check_result::ok : check_result::failed;
  }
  return m;
}

// ---- shoal's measurements ----------------------------------------------------------------------------------

measurement measure_pingpong(context& ctx, pingpong_kind kind, scope_kind scope, std::uint64_t bytes) {
  if (scope != scope_kind::thread && scope != scope_kind::warp)
    throw std::invalid_argument("ping-pong runs at thread or warp scope");
  const bool put_signal = kind == pingpong_kind::put_signal;
  if (!put_signal) bytes = sizeof(std::uint64_t);
  ctx.reserve(bytes);
  const shoal::device_handle h = ctx.world.device_handle();
  pingpong_args a{ctx.dst(),  ctx.src(),   bytes,      ctx.words() + context::kWordPingPong,   0, 0, 0,
                  1 - ctx.pe, ctx.pe == 0, put_signal, ctx.results() + context::kResultElapsed};
  const timed_launch launch = [&](std::uint64_t first, std::uint32_t warmup, std::uint32_t iters) {
    a.first = first;
    a.warmup = warmup;
    a.iters = iters;
    if (scope == scope_kind::thread)
      pingpong_kernel<shoal::thread_scope><<<1, 1, 0, ctx.stream>>>(h, a);
    else
      pingpong_kernel<shoal::warp_scope><<<1, 32, 0, ctx.stream>>>(h, a);
  };
  measurement m =
      time_in_kernel(ctx, [&](std::uint32_t w, std::uint32_t i) { return pingpong_round(ctx, launch, w, i); });
  if (!put_signal) {
    m.check = check_result::ok;  // every round trip awaited its exact value
    m.note = "values checked by the waits";
  } else if (ctx.opt.check) {
    const transfer both[] = {{0, ctx.src(), 1, ctx.dst(), bytes}, {1, ctx.src(), 0, ctx.dst(), bytes}};
    m.check = check_transfers(ctx, both, [&] { pingpong_round(ctx, launch, 0, 1); });
  }
  return m;
}

measurement measure_fetch_add(context& ctx) {
  const shoal::device_handle h = ctx.world.device_handle();
  std::uint64_t* word = ctx.words() + context::kWordAtomic;
  return time_fetch_add(ctx, word, [&](std::uint64_t, std::uint32_t warmup, std::uint32_t iters) {
    fetch_add_kernel<<<1, 1, 0, ctx.stream>>>(h, word, 1, warmup, iters, ctx.results() + context::kResultElapsed,
                                              ctx.results() + context::kResultErrors);
  });
}

namespace {
// Appends to m's note what the GPU takes for `one()` apart from the host: queued ahead of it and, when
// `graph` is set, the calls of a batch captured in one graph and replayed.
void note_gpu_times(context& ctx, measurement& m, const std::function<void()>& one, bool graph) {
  m.note += "; " + describe(time_queued_calls(ctx, std::min(static_cast<int>(m.ops), kQueuedCalls), one, one));
  if (!graph) return;
  const coll_graph captured(ctx, m.ops, [&](std::int64_t) { one(); });
  if (!captured.ok()) {
    m.note += "; graph capture failed: " + captured.error();
    return;
  }
  const std::vector<double> ms = time_batches(ctx, [&](int) { captured.launch(ctx.stream); });
  char text[64];
  std::snprintf(text, sizeof text, "; graph replay %.2f us per call",
                summarize(per_op_us(ctx.max_over_pes(ms), m.ops)).median_us);
  m.note += text;
}
}  // namespace

measurement measure_barrier_on_stream(context& ctx) {
  auto one = [&] { shoal::barrier_all_on_stream(ctx.world, ctx.stream); };
  measurement m = time_calls_on_stream(ctx, one);
  note_gpu_times(ctx, m, one, false);
  return m;
}

namespace {
// Each PE writes a seeded start into its own word, then applies kOps seeded values to the next PE's with
// `op_on_next`; every word must end at its start plus the previous PE's values (add, modulo 2^64) or at the
// previous PE's last value (set).
check_result check_signal_ops(context& ctx, std::uint64_t* word, shoal::sig_op op,
                              const std::function<void(std::uint64_t)>& op_on_next) {
  constexpr int kOps = 100;
  const std::uint64_t seed = ctx.next_seed();
  auto values_of = [&](int pe) {  // [0]: the start of pe's word; [1..kOps]: what pe applies to the next
    std::mt19937_64 gen(seed * 1000003 + std::uint64_t(pe));
    std::vector<std::uint64_t> v(kOps + 1);
    for (std::uint64_t& x : v) x = gen();
    return v;
  };
  const std::vector<std::uint64_t> mine = values_of(ctx.pe);
  const std::vector<std::uint64_t> from_previous = values_of((ctx.pe + ctx.n_pes - 1) % ctx.n_pes);
  ctx.barrier();  // every update of the timed loops has landed
  // On ctx.stream, which the barrier waits for: a pageable cudaMemcpy on the legacy stream may return before
  // its data lands, and the barrier does not wait for that stream, so the previous PE's first ops could
  // land before the start and be overwritten.
  SHOAL_PERF_CUDA(cudaMemcpyAsync(word, &mine[0], sizeof(std::uint64_t), cudaMemcpyHostToDevice, ctx.stream));
  ctx.barrier();
  for (int k = 1; k <= kOps; ++k) op_on_next(mine[k]);
  ctx.barrier();
  std::uint64_t got = 0;
  SHOAL_PERF_CUDA(cudaMemcpy(&got, word, sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
  std::uint64_t want = mine[0];
  for (int k = 1; k <= kOps; ++k) want = op == shoal::sig_op::add ? want + from_previous[k] : from_previous[k];
  return ctx.sum_over_pes(got == want ? 0 : 1) == 0 ? check_result::ok : check_result::failed;
}

}  // namespace

measurement measure_signal_op_on_stream(context& ctx, shoal::sig_op op) {
  std::uint64_t* word = ctx.words() + context::kWordSignalOp;
  const int next = (ctx.pe + 1) % ctx.n_pes;
  auto op_on_next = [&](std::uint64_t value) {
    shoal::signal_op_on_stream(ctx.world, word, value, op, next, ctx.stream);
  };
  auto one = [&] { op_on_next(1); };
  measurement m = time_calls_on_stream(ctx, one);
  note_gpu_times(ctx, m, one, true);
  if (ctx.opt.check) m.check = check_signal_ops(ctx, word, op, op_on_next);
  return m;
}

measurement measure_signal_wait_on_stream(context& ctx) {
  std::uint64_t* word = ctx.words() + context::kWordSignalWait;
  const int next = (ctx.pe + 1) % ctx.n_pes;
  std::uint64_t calls = 0;  // so far, the same on every PE: the count this PE's word reaches at each call
  auto one = [&] {
    ++calls;
    shoal::signal_op_on_stream(ctx.world, word, 1, shoal::sig_op::add, next, ctx.stream);
    shoal::signal_wait_until_on_stream(ctx.world, word, shoal::cmp::ge, calls, ctx.stream);
  };
  measurement m = time_calls_on_stream(ctx, one);
  note_gpu_times(ctx, m, one, false);  // a replayed graph would wait for counts its first replay passed
  ctx.barrier();
  std::uint64_t got = 0;
  SHOAL_PERF_CUDA(cudaMemcpy(&got, word, sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
  m.check = ctx.sum_over_pes(got == calls ? 0 : 1) == 0 ? check_result::ok : check_result::failed;
  m.note += "; values checked by the waits and the final count";
  return m;
}

measurement measure_barrier_in_kernel(context& ctx) {
  const shoal::device_handle h = ctx.world.device_handle();
  std::uint64_t* slots = ctx.words() + context::kWordBarrierCheck;
  return time_barrier_in_kernel(ctx, [&](std::uint64_t first, std::uint32_t warmup, std::uint32_t iters, bool check) {
    barrier_kernel<<<1, 32, 0, ctx.stream>>>(h, warmup, iters, slots, first, check,
                                             ctx.results() + context::kResultElapsed,
                                             ctx.results() + context::kResultErrors);
  });
}

}  // namespace shoal::perf
