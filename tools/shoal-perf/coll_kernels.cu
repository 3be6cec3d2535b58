// The in-kernel half of the collectives' measurements: one kernel makes N back-to-back calls of a
// collective at grid scope (the CTA count the on-stream form would launch) or at block scope (one CTA),
// timed inside the kernel; the barrier check's kernels; the local copy of the calibration.
//
// One kernel template per collective and scope, and one per collective with shoal::ll_only at grid scope
// (17 instantiations; bfloat16 sum for the reductions): each device collective instantiation costs seconds
// of compile time.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "coll.hpp"
#include "shoal/dev/coll.cuh"
#include "shoal/device.cuh"
#include "shoal/team.hpp"

namespace shoal::perf {
namespace {

constexpr double kTargetKernelNs = 20e6;  // a timed kernel runs about this long when --iters is not given
constexpr std::uint32_t kMinIters = 4, kMaxIters = 20000, kProbeIters = 4;
constexpr int kResultStartNs = 2, kResultEndNs = 3;  // ctx.results(): earliest CTA start, latest CTA end

struct loop_args {
  std::byte* dst;
  const std::byte* src;
  std::uint64_t bytes;   // OpenSHMEM bytes of one call
  std::uint64_t stride;  // call k uses slot (first_slot + k) % n_slots at byte offset slot * stride
  std::uint32_t n_slots, first_slot;
  std::uint32_t warmup, iters;   // untimed calls, then timed ones
  unsigned long long* start_ns;  // atomicMin of each CTA's start of the timed calls
  unsigned long long* end_ns;    // atomicMax of each CTA's end
  // Barrier only, with check: before call i each PE stores first_value + i + 1 into its word on the next
  // PE; after the barrier the word from the previous PE must hold it (or the next value: that PE may
  // already be in the next round).
  std::uint64_t* slots;
  std::uint64_t first_value;
  int check;
  unsigned long long* errors;
};

// Threads per CTA a loop kernel is compiled for: the grid's CTAs are shaped like the on-stream kernels'.
template <typename Scope>
inline constexpr int kLoopThreads = std::is_same_v<Scope, shoal::block_scope> ? kCollBlockThreads : kCollGridThreads;

// Every thread of the grid (or of the one CTA) makes every call. A CTA's calls are timed from its
// reaching call `warmup` to its end; the kernel's time is the earliest start to the latest end, so CTAs
// that run ahead on their own channels (grid scope) are counted until the last one finishes. With
// kLLOnly every call passes shoal::ll_only (no barrier: it has no such form).
template <collective Op, typename Scope, bool kLLOnly>
__global__ void __launch_bounds__(kLoopThreads<Scope>) coll_loop_kernel(shoal::team_handle t, loop_args a) {
  constexpr Scope scope{};
  using bf16 = __nv_bfloat16;
  std::uint32_t slot = a.first_slot % a.n_slots;
  std::uint64_t t0 = 0, bad = 0;
  for (std::uint32_t i = 0; i < a.warmup + a.iters; ++i) {
    if (i == a.warmup) {
      __syncthreads();
      t0 = detail::global_timer_ns();
    }
    std::byte* dst = a.dst + slot * a.stride;
    const std::byte* src = a.src + slot * a.stride;
    auto call = [&](auto... ll_only) {  // the collective, with the trailing shoal::ll_only or without
      if constexpr (Op == collective::reduce) {
        shoal::reduce(scope, t, shoal::op::sum, reinterpret_cast<bf16*>(dst), reinterpret_cast<const bf16*>(src),
                      a.bytes / sizeof(bf16), ll_only...);
      } else if constexpr (Op == collective::reducescatter) {
        shoal::reducescatter(scope, t, shoal::op::sum, reinterpret_cast<bf16*>(dst), reinterpret_cast<const bf16*>(src),
                             a.bytes / sizeof(bf16), ll_only...);
      } else if constexpr (Op == collective::fcollect) {
        shoal::fcollect_bytes(scope, t, dst, src, a.bytes, ll_only...);
      } else if constexpr (Op == collective::alltoall) {
        shoal::alltoall_bytes(scope, t, dst, src, a.bytes, ll_only...);
      } else if constexpr (Op == collective::broadcast) {
        shoal::broadcast_bytes(scope, t, dst, src, a.bytes, kBroadcastRoot, ll_only...);
      } else {
        const int pe = t.world.pe, n = t.world.n_pes;
        const std::uint64_t v = a.first_value + i + 1;
        if (a.check && Scope::leader()) shoal::p(t.world, a.slots + pe, v, (pe + 1) % n);
        shoal::barrier(scope, t);  // quiet first: the p above is visible on return
        if (a.check && Scope::leader()) {
          const std::uint64_t seen = *static_cast<volatile std::uint64_t*>(a.slots + (pe + n - 1) % n);
          bad += seen != v && seen != v + 1;
        }
      }
    };
    if constexpr (kLLOnly)
      call(shoal::ll_only);
    else
      call();
    if (++slot == a.n_slots) slot = 0;
  }
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    atomicMin(a.start_ns, static_cast<unsigned long long>(t0));
    atomicMax(a.end_ns, static_cast<unsigned long long>(detail::global_timer_ns()));
    if (bad != 0) atomicAdd(a.errors, static_cast<unsigned long long>(bad));
  }
}

template <typename Scope, bool kLLOnly = false>
void launch_loop(collective op, unsigned ctas, unsigned threads, cudaStream_t stream, const team_handle& t,
                 const loop_args& a) {
  switch (op) {
    case collective::reduce:
      coll_loop_kernel<collective::reduce, Scope, kLLOnly><<<ctas, threads, 0, stream>>>(t, a);
      break;
    case collective::reducescatter:
      coll_loop_kernel<collective::reducescatter, Scope, kLLOnly><<<ctas, threads, 0, stream>>>(t, a);
      break;
    case collective::fcollect:
      coll_loop_kernel<collective::fcollect, Scope, kLLOnly><<<ctas, threads, 0, stream>>>(t, a);
      break;
    case collective::alltoall:
      coll_loop_kernel<collective::alltoall, Scope, kLLOnly><<<ctas, threads, 0, stream>>>(t, a);
      break;
    case collective::broadcast:
      coll_loop_kernel<collective::broadcast, Scope, kLLOnly><<<ctas, threads, 0, stream>>>(t, a);
      break;
    case collective::barrier:
      if constexpr (kLLOnly)
        throw std::invalid_argument("the barrier has no shoal::ll_only form");
      else
        coll_loop_kernel<collective::barrier, Scope, false><<<ctas, threads, 0, stream>>>(t, a);
      break;
  }
  SHOAL_PERF_CUDA(cudaGetLastError());
}

// ---- the barrier check on a stream -----------------------------------------------------------------------

__global__ void store_to_next_kernel(shoal::device_handle h, std::uint64_t* slots, std::uint64_t value) {
  shoal::p(h, slots + h.pe, value, (h.pe + 1) % h.n_pes);
}

__global__ void check_from_previous_kernel(shoal::device_handle h, const std::uint64_t* slots, std::uint64_t value,
                                           unsigned long long* errors) {
  const std::uint64_t seen = *static_cast<const volatile std::uint64_t*>(slots + (h.pe + h.n_pes - 1) % h.n_pes);
  if (seen != value && seen != value + 1) atomicAdd(errors, 1ull);
}

// ---- the local copy of the calibration -----------------------------------------------------------------


}  // namespace

coll_result measure_coll_in_kernel(context& ctx, const coll_case& c) {
  const int n = ctx.n_pes;
  const std::uint64_t buffer = coll_buffer_bytes(c.op, c.bytes, n);
  ctx.reserve(buffer);
  team_handle h = world_team(ctx.world).device_handle();  // after reserve: it knows the heap's size
  if (c.force) h = h.with_algorithm(c.op, *c.force);

  coll_result r;
  if (c.mode == coll_mode::grid_ll && c.op == collective::barrier)
    throw std::invalid_argument("the barrier has no shoal::ll_only form (mode grid_ll)");
  r.algo = c.mode == coll_mode::block     ? coll_pick_one_block(h, c.op, c.bytes)
           : c.mode == coll_mode::grid_ll ? algorithm::ll
                                          : coll_pick(h, c.op, c.bytes);
  if (c.mode == coll_mode::block) {
    r.ctas = 1;
    r.threads = kCollBlockThreads;
  } else if (c.op == collective::barrier) {
    r.ctas = ctx.machine.sm_count;  // a persistent kernel's shape: one CTA per SM, all resident
    r.threads = kCollGridThreads;
  } else {
    // What the on-stream form launches, so a grid row is the on-stream call without its launch.
    const launch_shape shape = coll_launch_shape(h, c.op, r.algo, c.bytes, n);
    r.ctas = shape.ctas;
    r.threads = std::min(shape.threads, kCollGridThreads);  // the loop kernels are built for this many
    if (shape.threads != r.threads)
      r.m.note = "the on-stream kernel has " + std::to_string(shape.threads) + " threads per CTA; ";
  }

  auto* words = reinterpret_cast<unsigned long long*>(ctx.results());
  loop_args a{ctx.dst(),
              ctx.src(),
              c.bytes,
              context::slot_stride(buffer),
              ctx.n_slots(buffer),
              0,
              0,
              0,
              words + kResultStartNs,
              words + kResultEndNs,
              ctx.words() + context::kWordBarrierCheck,
              0,
              0,
              words + context::kResultErrors};
  std::uint64_t next_slot = 0;
  // Collective: one kernel of warmup + iters calls on every PE; the slowest PE's ns of the timed calls.
  auto run = [&](std::uint32_t warmup, std::uint32_t iters, bool check) {
    a.warmup = warmup;
    a.iters = iters;
    a.check = check;
    a.first_slot = static_cast<std::uint32_t>(next_slot % a.n_slots);
    next_slot += warmup + iters;
    if (c.op == collective::barrier) a.first_value = ctx.next_sequence(warmup + iters);
    SHOAL_PERF_CUDA(cudaMemsetAsync(words + kResultStartNs, 0xFF, sizeof(unsigned long long), ctx.stream));
    SHOAL_PERF_CUDA(cudaMemsetAsync(words + kResultEndNs, 0, sizeof(unsigned long long), ctx.stream));
    SHOAL_PERF_CUDA(cudaMemsetAsync(words + context::kResultErrors, 0, sizeof(unsigned long long), ctx.stream));
    ctx.barrier();
    if (c.mode == coll_mode::block)
      launch_loop<shoal::block_scope>(c.op, unsigned(r.ctas), unsigned(r.threads), ctx.stream, h, a);
    else if (c.mode == coll_mode::grid_ll)
      launch_loop<shoal::grid_scope, true>(c.op, unsigned(r.ctas), unsigned(r.threads), ctx.stream, h, a);
    else
      launch_loop<shoal::grid_scope>(c.op, unsigned(r.ctas), unsigned(r.threads), ctx.stream, h, a);
    ctx.barrier();
    const double ns = double(ctx.read_result(kResultEndNs)) - double(ctx.read_result(kResultStartNs));
    return ctx.max_over_pes({ns})[0];
  };

  std::uint32_t iters = 0;
  if (ctx.opt.iters > 0) {
    iters = static_cast<std::uint32_t>(ctx.opt.iters);
  } else {
    const double per_call = run(1, kProbeIters, false) / kProbeIters;
    const double wanted = per_call > 0 ? kTargetKernelNs / per_call : kMaxIters;
    iters = static_cast<std::uint32_t>(std::clamp<double>(std::floor(wanted), kMinIters, kMaxIters));
  }
  const std::uint32_t warmup = std::clamp<std::uint32_t>(iters / 8, 1, 16);
  std::vector<double> us;
  for (int rep = 0; rep < ctx.opt.warmup + ctx.opt.reps; ++rep) {
    const double ns = run(warmup, iters, false);
    if (rep >= ctx.opt.warmup) us.push_back(ns / 1e3 / iters);
  }
  r.m.ops = iters;
  r.m.t = summarize(us);
  r.m.note += "slowest PE";

  if (ctx.opt.check) {
    coll_check_outcome o;
    if (c.op == collective::barrier) {
      run(0, 100, true);
      const std::uint64_t errors = ctx.sum_over_pes(ctx.read_result(context::kResultErrors));
      o.result = errors == 0 ? check_result::ok : check_result::failed;
      if (errors != 0) o.note = std::to_string(errors) + " barrier rounds saw a stale value from the previous PE";
    } else {
      o = check_coll(ctx, c.op, c.bytes, [&] {
        const loop_args saved = a;
        a.n_slots = 1;
        next_slot = 0;
        run(0, 1, false);
        a = saved;
      });
    }
    r.m.check = o.result;
    if (!o.note.empty()) r.m.note += "; " + o.note;
  }
  return r;
}

coll_check_outcome check_barrier_on_stream(context& ctx, int rounds, const std::function<void()>& barrier_once) {
  const shoal::device_handle h = ctx.world.device_handle();
  std::uint64_t* slots = ctx.words() + context::kWordBarrierCheck;
  auto* errors = reinterpret_cast<unsigned long long*>(ctx.results() + context::kResultErrors);
  const std::uint64_t first = ctx.next_sequence(std::uint64_t(rounds));
  SHOAL_PERF_CUDA(cudaMemsetAsync(errors, 0, sizeof *errors, ctx.stream));
  ctx.barrier();
  for (int i = 0; i < rounds; ++i) {
    const std::uint64_t v = first + std::uint64_t(i) + 1;
    store_to_next_kernel<<<1, 1, 0, ctx.stream>>>(h, slots, v);
    SHOAL_PERF_CUDA(cudaGetLastError());
    barrier_once();
    check_from_previous_kernel<<<1, 1, 0, ctx.stream>>>(h, slots, v, errors);
    SHOAL_PERF_CUDA(cudaGetLastError());
  }
  ctx.barrier();
  const std::uint64_t bad = ctx.sum_over_pes(ctx.read_result(context::kResultErrors));
  coll_check_outcome o{bad == 0 ? check_result::ok : check_result::failed, ""};
  if (bad != 0) o.note = std::to_string(bad) + " barrier rounds saw a stale value from the previous PE";
  return o;
}

measurement measure_local_copy(context& ctx, std::uint64_t bytes) {
  ctx.reserve(2 * bytes);
  const int copies = ctx.opt.iters > 0 ? ctx.opt.iters : 8;
  cuda_event start, stop;
  std::vector<double> us;
  for (int rep = 0; rep < ctx.opt.warmup + ctx.opt.reps; ++rep) {
    ctx.sync_stream();
    SHOAL_PERF_CUDA(cudaEventRecord(start.e, ctx.stream));
    for (int k = 0; k < copies; ++k) {
      std::byte* base = ctx.dst() + (k % 2) * bytes;  // alternate halves, so each copy reads what is not in L2
      SHOAL_PERF_CUDA(cudaMemcpyAsync(base, ctx.src() + (k % 2) * bytes, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
    }
    SHOAL_PERF_CUDA(cudaEventRecord(stop.e, ctx.stream));
    SHOAL_PERF_CUDA(cudaEventSynchronize(stop.e));
    float ms = 0;
    SHOAL_PERF_CUDA(cudaEventElapsedTime(&ms, start.e, stop.e));
    if (rep >= ctx.opt.warmup) us.push_back(double(ms) * 1e3 / copies);
  }
  measurement m;
  m.ops = copies;
  m.t = summarize(us);
  m.note = "cudaMemcpyAsync device to device, this PE";
  return m;
}

}  // namespace shoal::perf
