// shoal-sm-probe: what ONE CTA moves to and from a peer GPU, with the SM's own loads and stores against the
// bulk-copy unit (TMA, cp.async.bulk) that the SM drives from shared memory. It explains the one-block rows
// of shoal-perf (docs/perf-notes.md): a CTA's ld/st traffic to a peer is bound by what it keeps in flight,
// while a bulk copy keeps a whole shared-memory pipeline in flight from one thread.
//
// Run under shoalrun with 2 PEs. Every variant runs one CTA of 1024 threads per PE, first on PE 0 alone
// (one way), then on both PEs at once (both ways, as an all-reduce does); PE 0 prints GB/s (median of 5).
// Copies are checked against their source afterwards.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_common.hpp"
#include "shoal/device.cuh"
#include "shoal/shoal.hpp"

namespace {

enum class variant {
  sm_put,
  sm_get,
  sm_store_only,
  sm_load_only,
  sm_local_copy,
  tma_put,
  tma_get,
  tma_store_only,
  tma_load_only,
  tma_local_copy
};

struct variant_info {
  variant v;
  const char* name;
  bool uses_tma;
  bool copies;  // writes a copy of the source that can be checked
};

constexpr variant_info kVariants[] = {
    {variant::sm_put, "SM put: 16 B ld local, st remote (copy_bytes)", false, true},
    {variant::sm_get, "SM get: 16 B ld.cg remote, st local", false, true},
    {variant::sm_store_only, "SM st remote from registers", false, false},
    {variant::sm_load_only, "SM ld.cg remote into registers", false, false},
    {variant::sm_local_copy, "SM local copy (copy_bytes, no peer)", false, true},
    {variant::tma_put, "TMA put: bulk local->smem->remote", true, true},
    {variant::tma_get, "TMA get: bulk remote->smem->local", true, true},
    {variant::tma_store_only, "TMA bulk store smem->remote", true, false},
    {variant::tma_load_only, "TMA bulk load remote->smem", true, false},
    {variant::tma_local_copy, "TMA local copy: bulk local->smem->local", true, true},
};

struct pipeline {
  int stages;
  unsigned chunk;  // bytes, a multiple of 16
};
constexpr pipeline kPipelines[] = {{2, 16 << 10}, {4, 16 << 10}, {6, 32 << 10}};
constexpr pipeline kNoPipeline{0, 0};

__device__ std::uint32_t smem_addr(const void* p) { return static_cast<std::uint32_t>(__cvta_generic_to_shared(p)); }

__device__ void bar_init(std::uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}
__device__ void bar_wait(std::uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// A bulk load of `bytes` from global memory into shared memory; `bar` completes its phase when they land.
__device__ void bulk_load(void* smem, const void* global, unsigned bytes, std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(smem)),
      "l"(global), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
// A bulk store of `bytes` from shared memory to global memory, as one bulk group.
__device__ void bulk_store(void* global, const void* smem, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(global), "r"(smem_addr(smem)),
               "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ void bulk_wait_read_all_but_one() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }
__device__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

// One thread drives a ring of `p.stages` chunks: bulk loads run p.stages chunks ahead of the stores.
__device__ void tma_copy(std::byte* dst, const std::byte* src, std::size_t bytes, std::byte* ring, std::uint64_t* bars,
                         pipeline p, bool load, bool store) {
  const std::size_t n = bytes / p.chunk;
  auto stage = [&](std::size_t k) { return ring + (k % p.stages) * p.chunk; };
  for (std::size_t k = 0; k < n && k < std::size_t(p.stages); ++k)
    if (load) bulk_load(stage(k), src + k * p.chunk, p.chunk, &bars[k % p.stages]);
  for (std::size_t k = 0; k < n; ++k) {
    if (load) bar_wait(&bars[k % p.stages], unsigned(k / p.stages) & 1);
    if (store) bulk_store(dst + k * p.chunk, stage(k), p.chunk);
    const std::size_t refill = store ? k - 1 + p.stages : k + p.stages;  // the stage freed last
    if (!load || (store && k == 0) || refill >= n) continue;
    if (store) bulk_wait_read_all_but_one();  // the store of chunk refill - stages has read its stage
    bulk_load(stage(refill), src + refill * p.chunk, p.chunk, &bars[refill % p.stages]);
  }
  if (store) bulk_wait_all();
}

// `mine` and `landing` are symmetric buffers of `bytes`; `local` is this PE's private destination.
__global__ void __launch_bounds__(1024)
    probe_kernel(shoal::device_handle h, variant v, pipeline p, bool run_here, std::byte* mine, std::byte* landing,
                 std::byte* local, std::size_t bytes, std::uint64_t* sink, std::uint64_t* elapsed_ns) {
  extern __shared__ __align__(128) std::byte smem[];
  auto* bars = reinterpret_cast<std::uint64_t*>(smem);
  std::byte* ring = smem + 128;
  const int peer = 1 - h.pe;
  std::byte* remote_landing = shoal::ptr(h, landing, peer);
  const std::byte* remote_mine = shoal::ptr(h, mine, peer);
  if (threadIdx.x == 0)
    for (int s = 0; s < p.stages; ++s) bar_init(&bars[s]);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  shoal::sync_all(shoal::block, h);
  const std::uint64_t t0 = shoal::detail::global_timer_ns();
  if (run_here) {
    const unsigned rank = threadIdx.x, size = blockDim.x;
    switch (v) {
      case variant::sm_put:
        shoal::detail::copy_bytes(remote_landing, mine, bytes, rank, size);
        break;
      case variant::sm_get:
        shoal::detail::copy_bytes<true>(local, remote_mine, bytes, rank, size);
        break;
      case variant::sm_store_only: {
        auto* to = reinterpret_cast<uint4*>(remote_landing);
        for (std::size_t i = rank; i < bytes / 16; i += size) to[i] = make_uint4(unsigned(i), rank, 1, 2);
        break;
      }
      case variant::sm_load_only: {
        const auto* from = reinterpret_cast<const uint4*>(remote_mine);
        constexpr int kUnroll = 8;
        unsigned x = 0;
        std::size_t i = rank;
        for (; i + (kUnroll - 1) * size < bytes / 16; i += kUnroll * size) {
          uint4 w[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) w[u] = __ldcg(from + i + u * size);
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) x ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
        }
        if (x == 0x12345678u) sink[0] = x;  // keeps the loads; practically never taken
        break;
      }
      case variant::sm_local_copy:
        shoal::detail::copy_bytes(local, mine, bytes, rank, size);
        break;
      case variant::tma_local_copy:
        if (rank == 0) tma_copy(local, mine, bytes, ring, bars, p, true, true);
        break;
      case variant::tma_put:
        if (rank == 0) tma_copy(remote_landing, mine, bytes, ring, bars, p, true, true);
        break;
      case variant::tma_get:
        if (rank == 0) tma_copy(local, remote_mine, bytes, ring, bars, p, true, true);
        break;
      case variant::tma_store_only:
        if (rank == 0) tma_copy(remote_landing, nullptr, bytes, ring, bars, p, false, true);
        break;
      case variant::tma_load_only:
        if (rank == 0) tma_copy(nullptr, remote_mine, bytes, ring, bars, p, true, false);
        break;
    }
    shoal::quiet(h);  // this thread's remote stores are complete
  }
  __syncthreads();
  if (threadIdx.x == 0) *elapsed_ns = shoal::detail::global_timer_ns() - t0;
  shoal::sync_all(shoal::block, h);
}

__global__ void fill(std::byte* p, std::size_t bytes, unsigned seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < bytes / 4;
       i += std::size_t(gridDim.x) * blockDim.x)
    reinterpret_cast<unsigned*>(p)[i] = unsigned(i) * 2654435761u ^ seed;
}

// Whether `copy` holds the peer's `mine` (put lands the peer's data in our landing buffer).
bool same_as_pattern(const std::byte* copy, std::size_t bytes, unsigned seed) {
  std::vector<unsigned> host(bytes / 4);
  PROBE_CUDA(cudaMemcpy(host.data(), copy, bytes, cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < host.size(); ++i)
    if (host[i] != (unsigned(i) * 2654435761u ^ seed)) return false;
  return true;
}

int run() {
  shoal::world w = shoal::init();
  if (w.n_pes() != 2) {
    std::printf("shoal-sm-probe needs exactly 2 PEs (have %d)\n", w.n_pes());
    return w.n_pes() == 1 ? 0 : 2;
  }
  const std::size_t bytes = 16u << 20;
  auto* mine = static_cast<std::byte*>(w.malloc(bytes));
  auto* landing = static_cast<std::byte*>(w.malloc(bytes));
  std::byte* local = nullptr;
  std::uint64_t *sink = nullptr, *elapsed = nullptr;
  PROBE_CUDA(cudaMalloc(&local, bytes));
  PROBE_CUDA(cudaMalloc(&sink, sizeof(std::uint64_t)));
  PROBE_CUDA(cudaMalloc(&elapsed, sizeof(std::uint64_t)));
  const unsigned seed = 0x9E3779B9u * unsigned(w.pe() + 1), peer_seed = 0x9E3779B9u * unsigned(2 - w.pe());
  fill<<<264, 1024>>>(mine, bytes, seed);
  PROBE_CUDA(cudaGetLastError());
  PROBE_CUDA(cudaDeviceSynchronize());
  const int max_smem = 128 + 6 * (32 << 10);
  PROBE_CUDA(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  barrier_all(w);

  auto measure = [&](variant_info info, pipeline p, bool both) {
    std::vector<double> gbps;
    bool ok = true;
    for (int rep = 0; rep < 6; ++rep) {
      PROBE_CUDA(cudaMemset(landing, 0, bytes));
      PROBE_CUDA(cudaMemset(local, 0, bytes));
      PROBE_CUDA(cudaDeviceSynchronize());
      barrier_all(w);
      const bool here = both || w.pe() == 0;
      probe_kernel<<<1, 1024, 128 + p.stages * p.chunk>>>(w.device_handle(), info.v, p, here, mine, landing, local,
                                                          bytes, sink, elapsed);
      PROBE_CUDA(cudaGetLastError());
      PROBE_CUDA(cudaDeviceSynchronize());
      barrier_all(w);
      std::uint64_t ns = 0;
      PROBE_CUDA(cudaMemcpy(&ns, elapsed, sizeof ns, cudaMemcpyDeviceToHost));
      if (rep > 0) gbps.push_back(double(bytes) / double(ns));  // rep 0 warms up
      // A put lands the sender's data in the receiver's landing buffer; a get in the getter's local buffer.
      const bool put = info.v == variant::sm_put || info.v == variant::tma_put;
      const bool local_copy = info.v == variant::sm_local_copy || info.v == variant::tma_local_copy;
      if (info.copies && here && !put) ok &= same_as_pattern(local, bytes, local_copy ? seed : peer_seed);
      if (info.copies && put && (both || w.pe() == 1)) ok &= same_as_pattern(landing, bytes, peer_seed);
    }
    std::sort(gbps.begin(), gbps.end());
    return std::pair{gbps[gbps.size() / 2], ok};
  };

  if (w.pe() == 0)
    std::printf("%-48s %-14s %10s %10s  %s\n", "variant (one CTA, 1024 threads)", "pipeline", "one way", "both ways",
                "check");
  for (const variant_info& info : kVariants) {
    std::vector<pipeline> pipes;
    if (info.uses_tma)
      pipes.assign(std::begin(kPipelines), std::end(kPipelines));
    else
      pipes.push_back(kNoPipeline);
    for (pipeline p : pipes) {
      auto [one, ok1] = measure(info, p, false);
      auto [two, ok2] = measure(info, p, true);
      // Each PE checks what landed on it: PE 0 prints its verdict in the table, PE 1 reports a failure.
      const bool ok = ok1 && ok2;
      if (w.pe() == 1 && !ok) std::fprintf(stderr, "PE 1: COPY WRONG for %s\n", info.name);
      char pipe[32] = "-";
      if (p.stages) std::snprintf(pipe, sizeof pipe, "%d x %u KiB", p.stages, p.chunk >> 10);
      if (w.pe() == 0)
        std::printf("%-48s %-14s %7.1f GB/s %7.1f GB/s  %s\n", info.name, pipe, one, two,
                    info.copies ? (ok ? "copy ok" : "COPY WRONG") : "-");
    }
  }
  barrier_all(w);
  w.free(mine);
  w.free(landing);
  PROBE_CUDA(cudaFree(local));
  PROBE_CUDA(cudaFree(sink));
  PROBE_CUDA(cudaFree(elapsed));
  return 0;
}

}  // namespace

int main() { return shoal::probe::main_reporting_errors(run); }
