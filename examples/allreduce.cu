// All-reduce the way a tensor-parallel inference loop calls it, in its two forms, each checked against the
// exact sum on every PE:
//   1. on a stream, captured once in a CUDA graph with the kernel that produces its input, then replayed
//      with a new input each time (a decode step);
//   2. inside one persistent kernel: each step computes, then all-reduces a small vector at grid scope with
//      shoal::ll_only (every call latency-bound), and uses the result. LL reaches PEs by load and store
//      only, so across nodes the kernel calls the default form, which goes through the proxy there.
//
//   shoalrun -n 2 -- ./allreduce
//
// The inputs are small integers held in floats, so every sum is exact and compared with ==. Host buffers
// that copies on the call's stream touch are pinned (cudaMallocHost): across nodes, a copy to or from
// pageable memory would hold the CUDA driver while the call waits for the proxy, and neither would move
// (docs/proxy-design.md, "Blocking CUDA calls beside a kernel that waits on the proxy").
#include <cstdio>
#include <vector>

#include "shoal/device.cuh"
#include "shoal/shoal.hpp"

namespace {

// What PE `pe` contributes at element i of step `step`, and the sum over a world of `n_pes` PEs.
__host__ __device__ float input(int pe, std::size_t i, int step) { return float((pe + 1) * int((i + step) % 7)); }
float expected_sum(int n_pes, std::size_t i, int step) { return float(n_pes * (n_pes + 1) / 2 * int((i + step) % 7)); }

bool cuda_ok(cudaError_t status, const char* what) {
  if (status != cudaSuccess) std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(status));
  return status == cudaSuccess;
}

// ---- 1. on a stream, replayed from a CUDA graph ---------------------------------------------------------

// Reads the step from device memory, so that one captured graph serves every step.
__global__ void produce(float* x, std::size_t n, int pe, const int* step) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += gridDim.x * std::size_t(blockDim.x))
    x[i] = input(pe, i, *step);
}

int on_a_stream(shoal::world& w) {
  const shoal::team& all = shoal::world_team(w);
  const std::size_t n = std::size_t{1} << 20;  // 4 MiB of floats
  const int steps = 20;
  float* x = w.malloc_array<float>(n);  // symmetric: the same object on every PE
  int* step = nullptr;
  int* host_step = nullptr;  // pinned, as is `got`
  float* got = nullptr;
  cudaStream_t stream;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  if (!cuda_ok(cudaMalloc(&step, sizeof(int)), "cudaMalloc") ||
      !cuda_ok(cudaMallocHost(&host_step, sizeof(int)), "cudaMallocHost") ||
      !cuda_ok(cudaMallocHost(&got, n * sizeof(float)), "cudaMallocHost") ||
      !cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture"))
    return 1;
  produce<<<64, 256, 0, stream>>>(x, n, w.pe(), step);
  if (!cuda_ok(cudaGetLastError(), "produce launch")) return 1;
  shoal::reduce_on_stream(all, x, x, n, shoal::reduce_op::sum, stream);  // in place; no host wait inside
  if (!cuda_ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture") ||
      !cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate"))
    return 1;

  std::size_t wrong = 0;
  for (int s = 0; s < steps; ++s) {
    // The copy back below waits for this step's call, whose completion means every member's x holds the
    // sum: no barrier is needed before the next step's produce overwrites x.
    *host_step = s;  // the stream is idle here: the last step ended with a synchronize
    if (!cuda_ok(cudaMemcpyAsync(step, host_step, sizeof(int), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync") ||
        !cuda_ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch") ||
        !cuda_ok(cudaMemcpyAsync(got, x, n * sizeof(float), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync") ||
        !cuda_ok(cudaStreamSynchronize(stream), "the graph's replay"))
      return 1;
    for (std::size_t i = 0; i < n; ++i) wrong += got[i] != expected_sum(w.n_pes(), i, s);
  }
  std::printf("PE %d: %d graph replays of produce + reduce_on_stream over %zu floats: %s\n", w.pe(), steps, n,
              wrong ? "WRONG" : "ok");

  const bool freed = cuda_ok(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy") &&
                     cuda_ok(cudaGraphDestroy(graph), "cudaGraphDestroy") &&
                     cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy") && cuda_ok(cudaFree(step), "cudaFree") &&
                     cuda_ok(cudaFreeHost(host_step), "cudaFreeHost") && cuda_ok(cudaFreeHost(got), "cudaFreeHost");
  barrier_all(w);  // nobody frees x while a peer may still use it
  w.free(x);
  return wrong || !freed ? 1 : 0;
}

// ---- 2. inside one kernel, at grid scope ---------------------------------------------------------------

// Every CTA must be resident (grid_sync); the host launches no more than fit.
template <bool NodeLocal>
__global__ void compute_and_reduce(shoal::team_handle t, float* y, float* total, std::size_t n, int steps) {
  const std::size_t first = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  const std::size_t stride = gridDim.x * std::size_t(blockDim.x);
  for (int s = 0; s < steps; ++s) {
    for (std::size_t i = first; i < n; i += stride) y[i] = input(shoal::my_pe(t.world), i, s);  // "compute"
    // The call splits y among the CTAs differently from the loop above: all of y must be written before
    // any CTA's call sends its part.
    shoal::grid_sync(t.world);
    if constexpr (NodeLocal)
      shoal::reduce(shoal::grid, t, shoal::op::sum, y, y, n, shoal::ll_only);
    else
      shoal::reduce(shoal::grid, t, shoal::op::sum, y, y, n);
    // Each CTA's call completed its own part of y; meet before reading the parts of the others.
    shoal::grid_sync(t.world);
    for (std::size_t i = first; i < n; i += stride) total[i] += y[i];  // "use the result"
  }
}

int inside_a_kernel(shoal::world& w) {
  const shoal::team& all = shoal::world_team(w);
  const std::size_t n = 1024;  // 4 KiB of floats: a latency-bound call
  const int steps = 100, ctas = 8, threads = 256;
  float* y = w.malloc_array<float>(n);
  float* total = nullptr;
  if (!cuda_ok(cudaMalloc(&total, n * sizeof(float)), "cudaMalloc") ||
      !cuda_ok(cudaMemset(total, 0, n * sizeof(float)), "cudaMemset"))
    return 1;
  if (w.bootstrap().n_nodes() == 1)
    compute_and_reduce<true><<<ctas, threads>>>(all.device_handle(), y, total, n, steps);
  else
    compute_and_reduce<false><<<ctas, threads>>>(all.device_handle(), y, total, n, steps);
  if (!cuda_ok(cudaGetLastError(), "kernel launch") || !cuda_ok(cudaDeviceSynchronize(), "the kernel")) return 1;

  std::vector<float> got(n);
  if (!cuda_ok(cudaMemcpy(got.data(), total, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy")) return 1;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int s = 0; s < steps; ++s) want += expected_sum(w.n_pes(), i, s);
    wrong += got[i] != want;
  }
  std::printf("PE %d: %d steps of compute + grid-scope reduce (%s) over %zu floats in one kernel: %s\n", w.pe(), steps,
              w.bootstrap().n_nodes() == 1 ? "ll_only" : "across nodes", n, wrong ? "WRONG" : "ok");

  const bool freed = cuda_ok(cudaFree(total), "cudaFree");
  barrier_all(w);
  w.free(y);
  return wrong || !freed ? 1 : 0;
}

}  // namespace

int main() {
  try {
    shoal::world w = shoal::init();
    const int failures = on_a_stream(w) + inside_a_kernel(w);
    return failures == 0 ? 0 : 1;
  } catch (const shoal::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
