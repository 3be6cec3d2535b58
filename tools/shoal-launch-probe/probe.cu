// shoal-launch-probe: what the host spends to enqueue one kernel launch, by launch API. The on-stream
// calls of shoal are one small kernel each, and a loop of them is bound by the host's enqueue rate on the
// machines measured (docs/perf-notes.md, entries 36 and 68). Every variant launches the same one-warp kernel
// that takes a team handle by value (the on-stream collectives' argument list) and waits for the previous
// kernel as they do; they differ only in how the host asks for the launch:
//   chevron           kernel<<<1, 32, 0, stream>>>(...)
//   runtime Ex        cudaLaunchKernelEx, no attributes
//   runtime Ex, PDL   cudaLaunchKernelEx with programmatic stream serialization (shoal before perf notes 68)
//   driver            cuLaunchKernel on the CUfunction of the same kernel (cudaGetFuncBySymbol)
//   driver Ex, PDL    cuLaunchKernelEx with the same attribute (shoal since)
//   empty chevron     an empty kernel without arguments (shoal-perf's launch floor)
// Two figures each, per launch: "queued", the host's time to enqueue a batch while a kernel holds the
// stream (so the GPU never drains the queue under it), and "loop", a free-running loop's time per call as
// the GPU sees it. One process, one GPU, no shoal job. Variants run in turn, repeated; medians.
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_common.hpp"
#include "shoal/team_handle.hpp"
#include "stream_gate.cuh"

namespace {

constexpr int kBatch = 256, kLoop = 4000, kRounds = 9;

__global__ void one_warp_kernel(shoal::team_handle t, void* dst, const void* src, std::size_t bytes) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (threadIdx.x == 0 && bytes == 1 && t.index == -7) *static_cast<char*>(dst) = *static_cast<const char*>(src);
}

__global__ void empty_kernel() {}

struct launcher {
  cudaStream_t stream;
  shoal::team_handle t{};
  void* dst;
  const void* src;
  std::size_t bytes = 64;
  CUfunction fn{};

  void chevron() { one_warp_kernel<<<1, 32, 0, stream>>>(t, dst, src, bytes); }
  void runtime_ex(bool pdl) {
    shoal::probe::one_warp_launch one_warp(stream, pdl);
    PROBE_CUDA(cudaLaunchKernelEx(&one_warp.config, one_warp_kernel, t, dst, src, bytes));
  }
  void driver() {
    void* args[] = {&t, &dst, &src, &bytes};
    PROBE_CUDA(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, args, nullptr));
  }
  void driver_ex_pdl() {
    void* args[] = {&t, &dst, &src, &bytes};
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 32;
    config.blockDimY = config.blockDimZ = 1;
    config.hStream = stream;
    CUlaunchAttribute attr[1]{};
    attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr[0].value.programmaticStreamSerializationAllowed = 1;
    config.attrs = attr;
    config.numAttrs = 1;
    PROBE_CUDA(cuLaunchKernelEx(&config, fn, args, nullptr));
  }
  void empty() { empty_kernel<<<1, 1, 0, stream>>>(); }
};

struct variant {
  const char* name;
  void (*launch)(launcher&);
  std::vector<double> queued_us, loop_us;
};

int run() {
  launcher l{};
  PROBE_CUDA(cudaSetDevice(0));
  PROBE_CUDA(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
  void* buffer = nullptr;
  PROBE_CUDA(cudaMalloc(&buffer, 128));
  l.dst = buffer;
  l.src = static_cast<char*>(buffer) + 64;
  PROBE_CUDA(
      cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&l.fn), reinterpret_cast<const void*>(one_warp_kernel)));
  shoal::probe::stream_gate gate;
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));

  std::vector<variant> variants = {
      {"chevron", [](launcher& x) { x.chevron(); }, {}, {}},
      {"runtime Ex", [](launcher& x) { x.runtime_ex(false); }, {}, {}},
      {"runtime Ex, PDL", [](launcher& x) { x.runtime_ex(true); }, {}, {}},
      {"driver", [](launcher& x) { x.driver(); }, {}, {}},
      {"driver Ex, PDL", [](launcher& x) { x.driver_ex_pdl(); }, {}, {}},
      {"empty chevron", [](launcher& x) { x.empty(); }, {}, {}},
  };
  for (int round = 0; round < kRounds + 1; ++round) {
    for (variant& v : variants) {
      // Queued: the host's enqueue time with the stream held.
      gate.hold(l.stream);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kBatch; ++i) v.launch(l);
      const std::chrono::duration<double, std::micro> host = std::chrono::steady_clock::now() - t0;
      PROBE_CUDA(cudaGetLastError());
      gate.open();
      PROBE_CUDA(cudaStreamSynchronize(l.stream));
      // Loop: launches as fast as the host makes them, timed on the GPU.
      PROBE_CUDA(cudaEventRecord(start, l.stream));
      for (int i = 0; i < kLoop; ++i) v.launch(l);
      PROBE_CUDA(cudaEventRecord(stop, l.stream));
      PROBE_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      PROBE_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (round > 0) {  // round 0 warms up
        v.queued_us.push_back(host.count() / kBatch);
        v.loop_us.push_back(ms * 1e3 / kLoop);
      }
    }
  }
  std::printf("%-18s %14s %12s   (per launch, median of %d rounds)\n", "variant", "queued (host)", "loop", kRounds);
  for (const variant& v : variants)
    std::printf("%-18s %11.2f us %9.2f us\n", v.name, shoal::probe::median(v.queued_us),
                shoal::probe::median(v.loop_us));
  return 0;
}

}  // namespace

int main() { return shoal::probe::main_reporting_errors(run); }
