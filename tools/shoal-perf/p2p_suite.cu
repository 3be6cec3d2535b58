// Bandwidth of point-to-point RMA: device put/get at thread, warp and block scope, and the stream-ordered
// (copy engine) forms. Kernels and their host drivers; the sweep over sizes and CTA counts is in p2p.cpp.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "benches.hpp"
#include "shoal/device.cuh"
#include "shoal/stream.hpp"

namespace shoal::perf {

const char* to_string(rma_dir d) { return d == rma_dir::put ? "put" : "get"; }

const char* to_string(scope_kind s) {
  switch (s) {
    case scope_kind::thread: return "thread";
    case scope_kind::warp: return "warp";
    case scope_kind::block: return "block";
    case scope_kind::grid: return "grid";
  }
  return "?";
}

namespace {

constexpr std::uint64_t kInnerBytes = 64ull << 20;  // below this per message, messages repeat inside one kernel
// One thread or one warp moves a few GB/s at most (a thread's get of 64 KiB, 0.07 GB/s): a batch of the usual
// 256 MiB would take seconds, eleven times per row. Their batches move at most this much.
constexpr std::uint64_t kSmallScopeBatchBytes = 16ull << 20;

struct rma_args {
  std::byte* dst;
  const std::byte* src;
  std::uint64_t bytes;        // the whole message; each scope instance moves its slice
  std::uint64_t slot_stride;  // message k of this kernel uses slot (first_slot + k) % n_slots
  std::uint32_t n_slots;
  std::uint32_t first_slot;
  std::uint32_t inner;        // messages this kernel moves, one after the other
  int quiet_each;             // 1: quiet after every message; 0: one quiet after the last
  int pe;                     // the remote PE
  int get;                    // 0: put src -> dst on pe; 1: get src on pe -> dst
};

// Every scope instance of the grid takes one contiguous slice of the message (16-byte multiples, so the
// copies stay vectorized); instances past the end of a small message have nothing to move and leave at
// once, as a user's kernel would. Launch bounds keep 1024-thread CTAs launchable (<= 64 registers).
template <typename Scope>
__global__ void __launch_bounds__(1024) rma_kernel(shoal::device_handle h, rma_args a) {
  constexpr Scope scope{};
  unsigned units, unit;
  if constexpr (std::is_same_v<Scope, shoal::grid_scope>) {
    units = 1;  // one grid-wide call: the library interleaves the grid's threads over the whole message
    unit = 0;
  } else if constexpr (std::is_same_v<Scope, shoal::block_scope>) {
    units = gridDim.x;
    unit = blockIdx.x;
  } else if constexpr (std::is_same_v<Scope, shoal::warp_scope>) {
    units = gridDim.x * (blockDim.x / 32);
    unit = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  } else {
    units = gridDim.x * blockDim.x;
    unit = blockIdx.x * blockDim.x + threadIdx.x;
  }
  const std::uint64_t chunk = ((a.bytes + units - 1) / units + 15) / 16 * 16;
  const std::uint64_t offset = std::uint64_t(unit) * chunk;
  if (offset >= a.bytes) return;  // uniform over the scope instance: its syncs are unaffected
  const std::uint64_t n = a.bytes - offset < chunk ? a.bytes - offset : chunk;
  std::uint32_t slot = a.first_slot % a.n_slots;
  for (std::uint32_t k = 0; k < a.inner; ++k) {
    const std::uint64_t at = std::uint64_t(slot) * a.slot_stride + offset;
    if (a.get) shoal::get_nbi(scope, h, a.dst + at, a.src + at, n, a.pe);
    else shoal::put_nbi(scope, h, a.dst + at, a.src + at, n, a.pe);
    if (a.quiet_each) shoal::quiet(scope, h);  // this message is complete before the next starts
    if (++slot == a.n_slots) slot = 0;
  }
  shoal::quiet(scope, h);  // every message of this kernel is complete (put: visible at pe; get: landed)
}

void launch_rma(const rma_case& c, shoal::device_handle h, const rma_args& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(c.ctas)), block(static_cast<unsigned>(c.threads));
  switch (c.scope) {
    case scope_kind::thread: rma_kernel<shoal::thread_scope><<<grid, block, 0, stream>>>(h, a); break;
    case scope_kind::warp: rma_kernel<shoal::warp_scope><<<grid, block, 0, stream>>>(h, a); break;
    case scope_kind::block: rma_kernel<shoal::block_scope><<<grid, block, 0, stream>>>(h, a); break;
    case scope_kind::grid: rma_kernel<shoal::grid_scope><<<grid, block, 0, stream>>>(h, a); break;
  }
  SHOAL_PERF_CUDA(cudaGetLastError());
}

}  // namespace

rma_batch plan_rma_batch(const context& ctx, const rma_case& c) {
  std::int64_t wanted = ctx.ops_per_batch(c.bytes);
  if (ctx.opt.iters == 0 && (c.scope == scope_kind::thread || c.scope == scope_kind::warp)) {
    const auto fits = static_cast<std::int64_t>(kSmallScopeBatchBytes / std::max<std::uint64_t>(c.bytes, 1));
    wanted = std::clamp<std::int64_t>(fits, 4, wanted);  // ops_per_batch is at least 4
  }
  const auto inner = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
      kInnerBytes / std::max<std::uint64_t>(c.bytes, 1), 1, static_cast<std::uint64_t>(wanted)));
  return {inner, (wanted + inner - 1) / inner};
}

std::vector<double> per_op_us(const std::vector<double>& batch_ms, std::int64_t ops) {
  std::vector<double> us;
  for (double ms : batch_ms) us.push_back(ms * 1e3 / static_cast<double>(ops));
  return us;
}

transfer rma_transfer(const context& ctx, rma_dir dir, std::uint64_t bytes) {
  return dir == rma_dir::put ? transfer{0, ctx.src(), 1, ctx.dst(), bytes}
                             : transfer{1, ctx.src(), 0, ctx.dst(), bytes};
}

measurement measure_device_rma(context& ctx, const rma_case& c) {
  if (c.ctas < 1 || c.threads < 1 || c.threads > 1024 || (c.scope == scope_kind::warp && c.threads % 32 != 0))
    throw std::invalid_argument("device RMA: need ctas >= 1 and 1..1024 threads (a multiple of 32 at warp scope), got " +
                                std::to_string(c.ctas) + " x " + std::to_string(c.threads));
  ctx.reserve(c.bytes);
  const shoal::device_handle h = ctx.world.device_handle();
  const rma_batch plan = plan_rma_batch(ctx, c);
  const std::uint32_t inner = plan.inner;
  const std::int64_t launches = plan.launches;
  rma_args a{ctx.dst(), ctx.src(), c.bytes, context::slot_stride(c.bytes), ctx.n_slots(c.bytes), 0, inner,
             ctx.opt.quiet_each, 1, c.dir == rma_dir::get};

  std::uint64_t next_slot = 0;
  std::vector<double> ms = time_batches(ctx, [&](int) {
    if (ctx.pe != 0) return;
    for (std::int64_t l = 0; l < launches; ++l) {
      a.first_slot = static_cast<std::uint32_t>(next_slot % a.n_slots);
      next_slot += inner;
      launch_rma(c, h, a, ctx.stream);
    }
  });
  measurement m;
  m.ops = launches * inner;
  m.t = summarize(per_op_us(ms, m.ops));
  if (ctx.opt.check) {
    const transfer t = rma_transfer(ctx, c.dir, c.bytes);
    m.check = check_transfers(ctx, {&t, 1}, [&] {
      if (ctx.pe != 0) return;
      rma_args once = a;
      once.first_slot = 0;
      once.n_slots = 1;
      once.inner = 1;
      launch_rma(c, h, once, ctx.stream);
      ctx.sync_stream();
    });
  }
  return m;
}

measurement measure_stream_rma(context& ctx, rma_dir dir, std::uint64_t bytes) {
  ctx.reserve(bytes);
  const std::uint64_t stride = context::slot_stride(bytes);
  const std::uint32_t n_slots = ctx.n_slots(bytes);
  const std::int64_t ops = ctx.ops_per_batch(bytes);
  auto enqueue = [&](std::uint64_t slot) {
    std::byte* dst = ctx.dst() + slot * stride;
    const std::byte* src = ctx.src() + slot * stride;
    if (dir == rma_dir::put) shoal::put_on_stream(ctx.world, dst, src, bytes, 1, ctx.stream);
    else shoal::get_on_stream(ctx.world, dst, src, bytes, 1, ctx.stream);
  };
  std::uint64_t next_slot = 0;
  std::vector<double> ms = time_batches(ctx, [&](int) {
    if (ctx.pe != 0) return;
    for (std::int64_t i = 0; i < ops; ++i) enqueue(next_slot++ % n_slots);
  });
  measurement m;
  m.ops = ops;
  m.t = summarize(per_op_us(ms, ops));
  if (ctx.opt.check) {
    const transfer t = rma_transfer(ctx, dir, bytes);
    m.check = check_transfers(ctx, {&t, 1}, [&] {
      if (ctx.pe != 0) return;
      enqueue(0);
      ctx.sync_stream();
    });
  }
  return m;
}

}  // namespace shoal::perf
