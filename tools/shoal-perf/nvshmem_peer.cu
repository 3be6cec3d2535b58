// NVSHMEM side by side (nvshmem_peer.hpp). Every measurement mirrors shoal's of the same name: the same
// launch shapes, rotation, in-kernel clocks and batch timing; only the calls are NVSHMEM's.
#include "nvshmem_peer.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/config.hpp"  // parse_bytes, for NVSHMEM_SYMMETRIC_SIZE
#include "shoal/bootstrap.hpp"

#ifdef SHOAL_PERF_HAVE_NVSHMEM
#include <cuda_bf16.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include "pingpong.cuh"
#endif

namespace shoal::perf {

#ifdef SHOAL_PERF_HAVE_NVSHMEM

namespace {

void nvshmem_failed(int status, const char* call) {
  throw std::runtime_error(std::string(call) + " failed with NVSHMEM status " + std::to_string(status));
}

// As SHOAL_PERF_NCCL: throws naming the call when it returns a non-zero status.
#define SHOAL_PERF_NVSHMEM(call)                                              \
  do {                                                                        \
    const int shoal_perf_nvshmem_ = (call);                                   \
    if (shoal_perf_nvshmem_ != 0) nvshmem_failed(shoal_perf_nvshmem_, #call); \
  } while (0)

// NVSHMEM's symmetric size when the user set none: both arenas for a buffer of 512 MiB (the quick suite's
// largest is 256 MiB; the coll suite's up to this) and room for NVSHMEM's own scratch. Larger buffers are
// measured without NVSHMEM, unless NVSHMEM_SYMMETRIC_SIZE allows them.
constexpr std::uint64_t kDefaultLargestBuffer = 512ull << 20;
constexpr std::uint64_t kOwnScratch = 512ull << 20;

constexpr int kWordPingPong = 0, kWordAtomic = 1, kWordBarrierCheck = 8;  // as context's words
constexpr int kWords = 64;

// ---- kernels ----------------------------------------------------------------------------------------------

struct rma_args {
  std::byte* dst;
  const std::byte* src;
  std::uint64_t bytes, slot_stride;
  std::uint32_t n_slots, first_slot, inner;
  int quiet_each;  // 1: quiet after every message (--quiet each); 0: one quiet after the last
  int pe, get;
};

// One contiguous slice per CTA, as shoal's block-scope rows and NVSHMEM's perftest. The quiet of thread 0
// after the block's barrier completes what every thread of the block issued, as at the kernel's end.
__global__ void __launch_bounds__(1024) rma_kernel(rma_args a) {
  const std::uint64_t chunk = ((a.bytes + gridDim.x - 1) / gridDim.x + 15) / 16 * 16;
  const std::uint64_t offset = std::uint64_t(blockIdx.x) * chunk;
  if (offset >= a.bytes) return;
  const std::uint64_t n = a.bytes - offset < chunk ? a.bytes - offset : chunk;
  std::uint32_t slot = a.first_slot % a.n_slots;
  for (std::uint32_t k = 0; k < a.inner; ++k) {
    const std::uint64_t at = std::uint64_t(slot) * a.slot_stride + offset;
    if (a.get)
      nvshmemx_getmem_nbi_block(a.dst + at, a.src + at, n, a.pe);
    else
      nvshmemx_putmem_nbi_block(a.dst + at, a.src + at, n, a.pe);
    if (a.quiet_each) {  // this message is complete before the next starts, as in shoal's row
      __syncthreads();
      if (threadIdx.x == 0) nvshmem_quiet();
      __syncthreads();
    }
    if (++slot == a.n_slots) slot = 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) nvshmem_quiet();
}

struct pingpong_args {
  std::byte* dst;
  const std::byte* src;
  std::uint64_t bytes;
  std::uint64_t* word;
  std::uint64_t first;
  std::uint32_t warmup, iters;
  int peer, initiator, use_put_signal;
  std::uint64_t* elapsed_ns;
};

// One thread, or one warp (kWarp), as shoal's ping-pong: round trip i carries first + i + 1.
template <bool kWarp>
__global__ void pingpong_kernel(pingpong_args a) {
  auto send = [&](std::uint64_t v) {
    if (a.use_put_signal) {
      if constexpr (kWarp)
        nvshmemx_putmem_signal_warp(a.dst, a.src, a.bytes, a.word, v, NVSHMEM_SIGNAL_SET, a.peer);
      else
        nvshmem_putmem_signal(a.dst, a.src, a.bytes, a.word, v, NVSHMEM_SIGNAL_SET, a.peer);
    } else if (threadIdx.x == 0) {
      nvshmem_uint64_p(a.word, v, a.peer);
    }
  };
  auto await = [&](std::uint64_t v) {
    if (a.use_put_signal)
      nvshmem_signal_wait_until(a.word, NVSHMEM_CMP_EQ, v);
    else
      nvshmem_uint64_wait_until(a.word, NVSHMEM_CMP_EQ, v);
    if constexpr (kWarp) __syncwarp();
  };
  const std::uint64_t ns = pingpong_loop(a.first, a.warmup, a.iters, a.initiator, send, await);
  if (a.initiator && threadIdx.x == 0) *a.elapsed_ns = ns;
}

__global__ void fetch_add_kernel(std::uint64_t* word, int peer, std::uint32_t warmup, std::uint32_t iters,
                                 std::uint64_t* elapsed_ns, std::uint64_t* errors) {
  std::uint64_t add = 1, expect = 0, bad = 0, t0 = 0;
  for (std::uint32_t i = 0; i < warmup + iters; ++i) {
    if (i == warmup) t0 = detail::global_timer_ns();
    const std::uint64_t got = nvshmem_uint64_atomic_fetch_add(word, add, peer);
    bad += got != expect;
    expect += 1;
    add = 1 + (got >> 63);  // always 1, but the compiler cannot know: the round trips stay dependent
  }
  *elapsed_ns = detail::global_timer_ns() - t0;
  *errors = bad;
}

// With `check`, as shoal's barrier kernel: a value into the next PE's slot before each barrier, checked after.
__global__ void barrier_kernel(std::uint32_t warmup, std::uint32_t iters, std::uint64_t* slots, std::uint64_t first,
                               int check, std::uint64_t* elapsed_ns, std::uint64_t* errors) {
  const int pe = nvshmem_my_pe(), n = nvshmem_n_pes();
  std::uint64_t t0 = 0, bad = 0;
  for (std::uint32_t i = 0; i < warmup + iters; ++i) {
    if (i == warmup) t0 = detail::global_timer_ns();
    const std::uint64_t v = first + i + 1;
    if (check && threadIdx.x == 0) nvshmem_uint64_p(slots + pe, v, (pe + 1) % n);
    nvshmemx_barrier_all_block();
    if (check && threadIdx.x == 0) {
      const std::uint64_t seen = *static_cast<volatile std::uint64_t*>(slots + (pe + n - 1) % n);
      bad += seen != v && seen != v + 1;
    }
  }
  if (threadIdx.x == 0) {
    *elapsed_ns = detail::global_timer_ns() - t0;
    *errors = bad;
  }
}

struct reduce_loop_args {
  std::byte* dst;
  const std::byte* src;
  std::uint64_t count, stride;
  std::uint32_t n_slots, first_slot, warmup, iters;
  std::uint64_t* elapsed_ns;
};

// Back-to-back all-reduces by one CTA, as shoal's block-scope loop kernel.
__global__ void __launch_bounds__(kCollBlockThreads) reduce_block_kernel(reduce_loop_args a) {
  std::uint32_t slot = a.first_slot % a.n_slots;
  std::uint64_t t0 = 0;
  for (std::uint32_t i = 0; i < a.warmup + a.iters; ++i) {
    if (i == a.warmup) {
      __syncthreads();
      t0 = detail::global_timer_ns();
    }
    auto* dst = reinterpret_cast<__nv_bfloat16*>(a.dst + slot * a.stride);
    const auto* src = reinterpret_cast<const __nv_bfloat16*>(a.src + slot * a.stride);
    nvshmemx_bfloat16_sum_reduce_block(NVSHMEM_TEAM_WORLD, dst, src, a.count);
    if (++slot == a.n_slots) slot = 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) *a.elapsed_ns = detail::global_timer_ns() - t0;
}

void launched() { SHOAL_PERF_CUDA(cudaGetLastError()); }

}  // namespace

struct nvshmem_peer::impl {
  std::string version;
  std::byte* src = nullptr;  // NVSHMEM's arenas, as large as the context's
  std::byte* dst = nullptr;
  std::uint64_t arena_bytes = 0;
  std::uint64_t* words = nullptr;  // kWords symmetric words, zero at start
  std::uint64_t heap_bytes = 0;    // NVSHMEM_SYMMETRIC_SIZE (0: not known)

  // Collective: arenas for buffers of `buffer` bytes, as large as the context's would be for that buffer
  // alone (at least 2 x L2 + 64 MiB, so rotation keeps L2 from serving repeats). They only grow: a suite that
  // reserved the context for its largest buffer still measures NVSHMEM at every size its heap holds.
  void reserve(context& ctx, std::uint64_t buffer) {
    const std::uint64_t need = ctx.arena_bytes_for(buffer);
    if (need <= arena_bytes) return;
    if (heap_bytes != 0 && 2 * need + kOwnScratch > heap_bytes)
      throw std::runtime_error("its heap (NVSHMEM_SYMMETRIC_SIZE=" + std::to_string(heap_bytes) +
                               ") cannot hold two buffers of " + std::to_string(need) + " bytes");
    ctx.sync_stream();
    nvshmem_barrier_all();
    if (src != nullptr) nvshmem_free(src);
    if (dst != nullptr) nvshmem_free(dst);
    src = dst = nullptr;
    arena_bytes = 0;
    src = static_cast<std::byte*>(nvshmem_malloc(need));
    dst = static_cast<std::byte*>(nvshmem_malloc(need));
    if (src == nullptr || dst == nullptr)
      throw std::runtime_error("nvshmem_malloc of " + std::to_string(need) + " bytes failed (raise NVSHMEM_SYMMETRIC_SIZE)");
    arena_bytes = need;
  }

  // Slots of a message or buffer size in these arenas (as context::n_slots in the context's).
  std::uint32_t n_slots(const context& ctx, std::uint64_t bytes) const {
    if (!ctx.opt.rotate) return 1;
    return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(arena_bytes / context::slot_stride(bytes), 1, 1u << 30));
  }

  // For a check: the data moves through shoal's buffers (slot 0), which the checkers fill and read. Copies
  // `src_bytes` of ctx.src() into NVSHMEM's src and `dst_bytes` (plus the guard) of the poisoned ctx.dst()
  // into NVSHMEM's dst, meets, runs `op` (waited for), meets, and copies NVSHMEM's dst back.
  void through_shoal_buffers(context& ctx, std::uint64_t src_bytes, std::uint64_t dst_bytes,
                             const std::function<void()>& op) {
    const std::uint64_t back = std::min(dst_bytes + kGuardBytes, arena_bytes);
    SHOAL_PERF_CUDA(cudaMemcpyAsync(src, ctx.src(), src_bytes, cudaMemcpyDeviceToDevice, ctx.stream));
    SHOAL_PERF_CUDA(cudaMemcpyAsync(dst, ctx.dst(), back, cudaMemcpyDeviceToDevice, ctx.stream));
    ctx.barrier();
    op();
    ctx.sync_stream();
    ctx.barrier();
    SHOAL_PERF_CUDA(cudaMemcpyAsync(ctx.dst(), dst, back, cudaMemcpyDeviceToDevice, ctx.stream));
    ctx.sync_stream();
  }
};

bool nvshmem_peer::compiled_in() { return true; }

std::unique_ptr<nvshmem_peer> nvshmem_peer::open(context& ctx) {
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
  std::uint64_t heap_bytes = 0;
  if (const char* size = std::getenv("NVSHMEM_SYMMETRIC_SIZE"); size == nullptr) {
    heap_bytes = 2 * ctx.arena_bytes_for(kDefaultLargestBuffer) + kOwnScratch;
    setenv("NVSHMEM_SYMMETRIC_SIZE", std::to_string(heap_bytes).c_str(), 1);
  } else {
    try {
      heap_bytes = detail::parse_bytes("NVSHMEM_SYMMETRIC_SIZE", size);
    } catch (const std::exception&) {
      heap_bytes = 0;  // a form only NVSHMEM reads: it decides
    }
  }
  SHOAL_PERF_CUDA(cudaSetDevice(ctx.world.device()));
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (ctx.pe == 0) SHOAL_PERF_NVSHMEM(nvshmemx_get_uniqueid(&id));
  ctx.world.bootstrap().broadcast(&id, sizeof id, 0);
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  SHOAL_PERF_NVSHMEM(nvshmemx_set_attr_uniqueid_args(ctx.pe, ctx.n_pes, &id, &attr));
  SHOAL_PERF_NVSHMEM(nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr));
  if (nvshmem_my_pe() != ctx.pe || nvshmem_n_pes() != ctx.n_pes)
    throw std::runtime_error("NVSHMEM numbered the PEs differently from shoal");
  auto state = std::make_unique<impl>();
  state->heap_bytes = heap_bytes;
  int major = 0, minor = 0, patch = 0;
  nvshmemx_vendor_get_version_info(&major, &minor, &patch);
  state->version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  state->words = static_cast<std::uint64_t*>(nvshmem_calloc(kWords, sizeof(std::uint64_t)));
  if (state->words == nullptr) throw std::runtime_error("nvshmem_calloc of the flag words failed");
  return std::unique_ptr<nvshmem_peer>(new nvshmem_peer(std::move(state)));
}

nvshmem_peer::~nvshmem_peer() {
  // Cleanup: nothing to do about a failure here.
  nvshmem_barrier_all();
  if (impl_->src != nullptr) nvshmem_free(impl_->src);
  if (impl_->dst != nullptr) nvshmem_free(impl_->dst);
  nvshmem_free(impl_->words);
  nvshmem_finalize();
}

std::string nvshmem_peer::version() const { return impl_->version; }

measurement nvshmem_peer::measure_device_rma(context& ctx, const rma_case& c) {
  if (c.scope != scope_kind::block) throw std::invalid_argument("NVSHMEM side by side: block-scope RMA only");
  ctx.reserve(c.bytes);
  impl& s = *impl_;
  s.reserve(ctx, c.bytes);
  const rma_batch plan = plan_rma_batch(ctx, c);
  rma_args a{s.dst,
             s.src,
             c.bytes,
             context::slot_stride(c.bytes),
             s.n_slots(ctx, c.bytes),
             0,
             plan.inner,
             ctx.opt.quiet_each,
             1,
             c.dir == rma_dir::get};
  const dim3 grid(static_cast<unsigned>(c.ctas)), block(static_cast<unsigned>(c.threads));
  std::uint64_t next_slot = 0;
  std::vector<double> ms = time_batches(ctx, [&](int) {
    if (ctx.pe != 0) return;
    for (std::int64_t l = 0; l < plan.launches; ++l) {
      a.first_slot = static_cast<std::uint32_t>(next_slot % a.n_slots);
      next_slot += plan.inner;
      rma_kernel<<<grid, block, 0, ctx.stream>>>(a);
      launched();
    }
  });
  measurement m;
  m.ops = plan.launches * plan.inner;
  m.t = summarize(per_op_us(ms, m.ops));
  if (ctx.opt.check) {
    const transfer t = rma_transfer(ctx, c.dir, c.bytes);
    m.check = check_transfers(ctx, {&t, 1}, [&] {
      s.through_shoal_buffers(ctx, c.bytes, c.bytes, [&] {
        if (ctx.pe != 0) return;
        rma_args once = a;
        once.first_slot = 0;
        once.n_slots = 1;
        once.inner = 1;
        rma_kernel<<<grid, block, 0, ctx.stream>>>(once);
        launched();
      });
    });
  }
  return m;
}

measurement nvshmem_peer::measure_pingpong(context& ctx, pingpong_kind kind, scope_kind scope, std::uint64_t bytes) {
  if (scope != scope_kind::thread && scope != scope_kind::warp)
    throw std::invalid_argument("ping-pong runs at thread or warp scope");
  const bool put_signal = kind == pingpong_kind::put_signal;
  if (!put_signal) bytes = sizeof(std::uint64_t);
  ctx.reserve(bytes);
  impl& s = *impl_;
  s.reserve(ctx, bytes);
  pingpong_args a{s.dst,
                  s.src,
                  bytes,
                  s.words + kWordPingPong,
                  0,
                  0,
                  0,
                  1 - ctx.pe,
                  ctx.pe == 0,
                  put_signal,
                  ctx.results() + context::kResultElapsed};
  const timed_launch launch = [&](std::uint64_t first, std::uint32_t warmup, std::uint32_t iters) {
    a.first = first;
    a.warmup = warmup;
    a.iters = iters;
    if (scope == scope_kind::thread)
      pingpong_kernel<false><<<1, 1, 0, ctx.stream>>>(a);
    else
      pingpong_kernel<true><<<1, 32, 0, ctx.stream>>>(a);
  };
  measurement m =
      time_in_kernel(ctx, [&](std::uint32_t w, std::uint32_t i) { return pingpong_round(ctx, launch, w, i); });
  if (!put_signal) {
    m.check = check_result::ok;  // every round trip awaited its exact value
  } else if (ctx.opt.check) {
    const transfer both[] = {{0, ctx.src(), 1, ctx.dst(), bytes}, {1, ctx.src(), 0, ctx.dst(), bytes}};
    m.check = check_transfers(
        ctx, both, [&] { s.through_shoal_buffers(ctx, bytes, bytes, [&] { pingpong_round(ctx, launch, 0, 1); }); });
  }
  return m;
}

measurement nvshmem_peer::measure_fetch_add(context& ctx) {
  std::uint64_t* word = impl_->words + kWordAtomic;
  return time_fetch_add(ctx, word, [&](std::uint64_t, std::uint32_t warmup, std::uint32_t iters) {
    fetch_add_kernel<<<1, 1, 0, ctx.stream>>>(word, 1, warmup, iters, ctx.results() + context::kResultElapsed,
                                              ctx.results() + context::kResultErrors);
  });
}

measurement nvshmem_peer::measure_barrier_on_stream(context& ctx) {
  return time_calls_on_stream(ctx, [&] { nvshmemx_barrier_all_on_stream(ctx.stream); });
}

measurement nvshmem_peer::measure_barrier_in_kernel(context& ctx) {
  std::uint64_t* slots = impl_->words + kWordBarrierCheck;
  return time_barrier_in_kernel(ctx, [&](std::uint64_t first, std::uint32_t warmup, std::uint32_t iters, bool check) {
    barrier_kernel<<<1, 32, 0, ctx.stream>>>(warmup, iters, slots, first, check,
                                             ctx.results() + context::kResultElapsed,
                                             ctx.results() + context::kResultErrors);
  });
}

bool nvshmem_peer::has(collective op, coll_mode mode) {
  return mode == coll_mode::stream || (mode == coll_mode::block && op == collective::reduce);
}

measurement nvshmem_peer::measure_coll(context& ctx, collective op, std::uint64_t bytes, coll_mode mode) {
  if (!has(op, mode))
    throw std::invalid_argument("NVSHMEM side by side has no " + coll_name(op) + " in mode " + to_string(mode));
  const std::uint64_t buffer = coll_buffer_bytes(op, bytes, ctx.n_pes);
  ctx.reserve(buffer);
  impl& s = *impl_;
  s.reserve(ctx, buffer);
  const std::uint64_t stride = context::slot_stride(buffer);
  const std::uint32_t n_slots = s.n_slots(ctx, buffer);
  const std::size_t count = bytes / kCollElemBytes;
  const nvshmem_team_t team = NVSHMEM_TEAM_WORLD;
  measurement m;

  if (mode == coll_mode::block) {
    reduce_loop_args a{s.dst, s.src, count, stride, n_slots, 0, 0, 0, ctx.results() + context::kResultElapsed};
    std::uint32_t next_slot = 0;
    auto run = [&](std::uint32_t warmup, std::uint32_t iters) {
      a.first_slot = next_slot;
      next_slot = (next_slot + warmup + iters) % n_slots;
      a.warmup = warmup;
      a.iters = iters;
      ctx.barrier();
      reduce_block_kernel<<<1, kCollBlockThreads, 0, ctx.stream>>>(a);
      launched();
      ctx.barrier();
      return ctx.max_over_pes({static_cast<double>(ctx.read_result(context::kResultElapsed))})[0];
    };
    m = time_in_kernel(ctx, run);
    if (ctx.opt.check) {
      const coll_check_outcome o = check_coll(ctx, op, bytes, [&] {
        s.through_shoal_buffers(ctx, coll_src_bytes(op, bytes, ctx.n_pes), coll_dst_bytes(op, bytes, ctx.n_pes), [&] {
          reduce_loop_args once = a;
          once.first_slot = 0;
          once.n_slots = 1;
          once.warmup = 0;
          once.iters = 1;
          reduce_block_kernel<<<1, kCollBlockThreads, 0, ctx.stream>>>(once);
          launched();
        });
      });
      m.check = o.result;
      m.note = o.note;
    }
    return m;
  }

  auto call = [&](std::uint64_t slot) {
    std::byte* dst = s.dst + slot * stride;
    const std::byte* src = s.src + slot * stride;
    auto* dst16 = reinterpret_cast<__nv_bfloat16*>(dst);
    const auto* src16 = reinterpret_cast<const __nv_bfloat16*>(src);
    switch (op) {
      case collective::reduce:
        SHOAL_PERF_NVSHMEM(nvshmemx_bfloat16_sum_reduce_on_stream(team, dst16, src16, count, ctx.stream));
        break;
      case collective::reducescatter:
        SHOAL_PERF_NVSHMEM(nvshmemx_bfloat16_sum_reducescatter_on_stream(team, dst16, src16, count, ctx.stream));
        break;
      case collective::fcollect:
        SHOAL_PERF_NVSHMEM(nvshmemx_fcollectmem_on_stream(team, dst, src, bytes, ctx.stream));
        break;
      case collective::alltoall:
        SHOAL_PERF_NVSHMEM(nvshmemx_alltoallmem_on_stream(team, dst, src, bytes, ctx.stream));
        break;
      case collective::broadcast:
        SHOAL_PERF_NVSHMEM(nvshmemx_broadcastmem_on_stream(team, dst, src, bytes, kBroadcastRoot, ctx.stream));
        break;
      case collective::barrier:
        SHOAL_PERF_NVSHMEM(nvshmemx_barrier_on_stream(team, ctx.stream));
        break;
    }
  };
  const std::int64_t ops =
      op == collective::barrier ? (ctx.opt.iters > 0 ? ctx.opt.iters : 1000) : coll_ops(ctx, bytes);
  std::uint64_t next_slot = 0;
  m.ops = ops;
  m.t = summarize(time_coll_batches(ctx, ops, [&](int) {
    for (std::int64_t k = 0; k < ops; ++k) call(next_slot++ % n_slots);
  }));
  m.note = "NVSHMEM on a stream, slowest PE";
  if (ctx.opt.check && op != collective::barrier) {
    const coll_check_outcome o = check_coll(ctx, op, bytes, [&] {
      s.through_shoal_buffers(ctx, coll_src_bytes(op, bytes, ctx.n_pes), coll_dst_bytes(op, bytes, ctx.n_pes),
                              [&] { call(0); });
    });
    m.check = o.result;
    if (!o.note.empty()) m.note += "; " + o.note;
  }
  return m;
}

#else  // no NVSHMEM in this build

struct nvshmem_peer::impl {};
bool nvshmem_peer::compiled_in() { return false; }
std::unique_ptr<nvshmem_peer> nvshmem_peer::open(context&) { return nullptr; }
nvshmem_peer::~nvshmem_peer() = default;
std::string nvshmem_peer::version() const { return ""; }
measurement nvshmem_peer::measure_device_rma(context&, const rma_case&) { return {}; }
measurement nvshmem_peer::measure_pingpong(context&, pingpong_kind, scope_kind, std::uint64_t) { return {}; }
measurement nvshmem_peer::measure_fetch_add(context&) { return {}; }
measurement nvshmem_peer::measure_barrier_on_stream(context&) { return {}; }
measurement nvshmem_peer::measure_barrier_in_kernel(context&) { return {}; }
bool nvshmem_peer::has(collective, coll_mode) { return false; }
measurement nvshmem_peer::measure_coll(context&, collective, std::uint64_t, coll_mode) { return {}; }

#endif

nvshmem_peer::nvshmem_peer(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}

}  // namespace shoal::perf
