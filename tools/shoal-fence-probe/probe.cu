// shoal-fence-probe: what ordering costs at the start of a small kernel on a stream. barrier_all_on_stream
// within a node is one warp that waits for the previous kernel, fences at system scope, and stores its
// arrival flags; across NVLink that fence took ~1.6 µs of the barrier's ~3.1 (docs/perf-notes.md, entry 36),
// where the same fence inside a running kernel costs ~0.6 (entry 8). This probe asks, on one GPU, which
// part of the kernel's start makes it dear, and whether another form of the same ordering is cheaper.
//
// Every variant but the last two is a one-warp kernel whose lane 0 stores a counter to a device word (the
// arrival flag's stand-in) after its opening; they differ only in the opening:
//   none              the previous kernel's wait alone (unsafe for a barrier: measurement only)
//   fence.sc.sys      what the stream barrier does
//   fence.acq_rel.sys a release fence: all a barrier's arrival needs
//   fence.sc.gpu      a fence at GPU scope (not enough for peers: measurement only)
//   st.release.sys    no fence; the counter is stored with release semantics instead
//   spin, then fence  1 µs of spinning on the clock after the wait, then fence.sc.sys: is the fence dearer
//                     right at the kernel's start than later?
//   spin, no fence    the same spin alone, to subtract
//   fence twice       fence.sc.sys twice: what a second fence costs once the first has waited
// and two whose kernels store nothing, so that no kernel of the batch leaves a write behind (is the fence
// dear because earlier writes must become visible first?):
//   no store          the wait alone
//   fence, no store   the wait, then fence.sc.sys
// Each runs with and without programmatic dependent launch (PDL). The figure is the GPU's time per kernel
// with a batch queued ahead of the GPU behind a held stream, so the host's launch rate does not enter it.
// One process, one GPU, no shoal job. Variants run in turn, repeated; medians.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_common.hpp"
#include "stream_gate.cuh"

namespace {

constexpr int kBatch = 512, kRounds = 9;

enum class opening {
  none,
  fence_sc_sys,
  fence_acq_rel_sys,
  fence_sc_gpu,
  release_store,
  spin_fence,
  spin_only,
  fence_twice,
  no_store,
  fence_no_store,
};

__host__ __device__ constexpr bool stores_counter(opening kind) {
  return kind != opening::no_store && kind != opening::fence_no_store;
}

template <opening kind>
__global__ void opening_kernel(std::uint64_t* word) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (threadIdx.x != 0) return;
  if constexpr (kind == opening::spin_fence || kind == opening::spin_only) {
    const std::uint64_t until = shoal::detail::global_timer_ns() + 1000;
    while (shoal::detail::global_timer_ns() < until) {
    }
  }
  if constexpr (kind == opening::fence_sc_sys || kind == opening::spin_fence || kind == opening::fence_twice ||
                kind == opening::fence_no_store)
    asm volatile("fence.sc.sys;" ::: "memory");
  if constexpr (kind == opening::fence_twice) asm volatile("fence.sc.sys;" ::: "memory");
  if constexpr (kind == opening::fence_acq_rel_sys) asm volatile("fence.acq_rel.sys;" ::: "memory");
  if constexpr (kind == opening::fence_sc_gpu) asm volatile("fence.sc.gpu;" ::: "memory");
  if constexpr (!stores_counter(kind)) return;
  const std::uint64_t next = *word + 1;
  if constexpr (kind == opening::release_store)
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(word), "l"(next) : "memory");
  else
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(word), "l"(next) : "memory");
}

struct variant {
  const char* name;
  const void* kernel;
  bool stores;
  std::vector<double> pdl_us, plain_us;
};

template <opening kind>
variant make(const char* name) {
  return {name, reinterpret_cast<const void*>(opening_kernel<kind>), stores_counter(kind), {}, {}};
}

void launch(const void* kernel, std::uint64_t* word, bool pdl, cudaStream_t stream) {
  shoal::probe::one_warp_launch one_warp(stream, pdl);
  void* args[] = {&word};
  PROBE_CUDA(cudaLaunchKernelExC(&one_warp.config, kernel, args));
}

int run() {
  PROBE_CUDA(cudaSetDevice(0));
  cudaStream_t stream;
  PROBE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::uint64_t* word = nullptr;
  PROBE_CUDA(cudaMalloc(&word, sizeof(std::uint64_t)));
  PROBE_CUDA(cudaMemset(word, 0, sizeof(std::uint64_t)));
  shoal::probe::stream_gate gate;
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));

  std::vector<variant> variants = {
      make<opening::none>("none"),
      make<opening::fence_sc_sys>("fence.sc.sys"),
      make<opening::fence_acq_rel_sys>("fence.acq_rel.sys"),
      make<opening::fence_sc_gpu>("fence.sc.gpu"),
      make<opening::release_store>("st.release.sys"),
      make<opening::spin_fence>("spin, then fence"),
      make<opening::spin_only>("spin, no fence"),
      make<opening::fence_twice>("fence twice"),
      make<opening::no_store>("no store"),
      make<opening::fence_no_store>("fence, no store"),
  };
  std::uint64_t expected = 0;
  for (int round = 0; round < kRounds + 1; ++round) {
    for (variant& v : variants) {
      for (bool pdl : {true, false}) {
        gate.hold(stream);
        PROBE_CUDA(cudaEventRecord(start, stream));
        for (int i = 0; i < kBatch; ++i) launch(v.kernel, word, pdl, stream);
        PROBE_CUDA(cudaEventRecord(stop, stream));
        gate.open();
        PROBE_CUDA(cudaEventSynchronize(stop));
        float ms = 0;
        PROBE_CUDA(cudaEventElapsedTime(&ms, start, stop));
        if (v.stores) expected += kBatch;
        if (round > 0) (pdl ? v.pdl_us : v.plain_us).push_back(ms * 1e3 / kBatch);  // round 0 warms up
      }
    }
  }
  // Every kernel ran once, in stream order: the word counts those that store.
  std::uint64_t counted = 0;
  PROBE_CUDA(cudaMemcpy(&counted, word, sizeof counted, cudaMemcpyDeviceToHost));
  if (counted != expected) {
    std::fprintf(stderr, "the kernels counted %llu, expected %llu\n", static_cast<unsigned long long>(counted),
                 static_cast<unsigned long long>(expected));
    return 1;
  }
  std::printf("%-18s %12s %12s   (GPU time per kernel, queued; median of %d rounds of %d)\n", "opening", "PDL",
              "no PDL", kRounds, kBatch);
  for (const variant& v : variants)
    std::printf("%-18s %9.3f us %9.3f us\n", v.name, shoal::probe::median(v.pdl_us), shoal::probe::median(v.plain_us));
  return 0;
}

}  // namespace

int main() { return shoal::probe::main_reporting_errors(run); }
