// shoal-reduce-probe: the time of an on-stream all-reduce (reduce_on_stream, out of place) by element type
// and operator, where shoal-perf measures bfloat16 sum only. It exists to compare two builds of the
// element arithmetic: the kernels live in libshoal, so the same binary run with each build's library first
// on LD_LIBRARY_PATH is an A/B of the library alone. docs/perf-notes.md, entry 87, has the measurements.
//
// Every PE runs it (shoalrun -n 2). For each size, type and operator: 3 warm-up calls, then 7 batches of
// calls on one stream between two events, each batch after a barrier; PE 0 prints the median time per
// call and the algorithm bandwidth (bytes / time). The buffers hold random bits; results are not checked
// (the GPU tier's CollStreamTypes tests check every type and operator against a reference).
//
//   shoal-reduce-probe [--calls N]   (calls per batch, default 50)
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "probe_common.hpp"
#include "shoal/shoal.hpp"

namespace {

constexpr std::size_t kSizes[] = {std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{8} << 20,
                                   std::size_t{64} << 20};
constexpr int kBatches = 7;

struct buffers {
  std::byte* dst;
  std::byte* src;
};

// The median time per call, in microseconds, of reduce_on_stream<T> with `op` over `bytes`.
template <typename T>
double time_reduce(shoal::world& w, const buffers& b, std::size_t bytes, shoal::reduce_op op, int calls,
                   cudaStream_t stream) {
  const shoal::team& all = shoal::world_team(w);
  auto* dst = reinterpret_cast<T*>(b.dst);
  const auto* src = reinterpret_cast<const T*>(b.src);
  const std::size_t count = bytes / sizeof(T);
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) shoal::reduce_on_stream(all, dst, src, count, op, stream);
  PROBE_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> per_call;
  for (int batch = 0; batch < kBatches; ++batch) {
    barrier_all(w);
    PROBE_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < calls; ++i) shoal::reduce_on_stream(all, dst, src, count, op, stream);
    PROBE_CUDA(cudaEventRecord(stop, stream));
    PROBE_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    PROBE_CUDA(cudaEventElapsedTime(&ms, start, stop));
    per_call.push_back(1000.0 * ms / calls);
  }
  PROBE_CUDA(cudaEventDestroy(start));
  PROBE_CUDA(cudaEventDestroy(stop));
  return shoal::probe::median(per_call);
}

template <typename T>
void rows(shoal::world& w, const buffers& b, const char* type, std::initializer_list<shoal::reduce_op> ops, int calls,
          cudaStream_t stream) {
  for (std::size_t bytes : kSizes) {
    for (shoal::reduce_op op : ops) {
      const double us = time_reduce<T>(w, b, bytes, op, calls, stream);
      if (w.pe() == 0)
        std::printf("%-9s %-8s %10zu  %9.2f us  %7.1f GB/s\n", type, std::string(shoal::to_string(op)).c_str(), bytes,
                    us, double(bytes) / us / 1e3);
    }
  }
}

int run(int calls) {
  shoal::world w = shoal::init();
  const std::size_t most = kSizes[std::size(kSizes) - 1];
  buffers b{static_cast<std::byte*>(w.malloc(most)), static_cast<std::byte*>(w.malloc(most))};
  std::vector<std::uint32_t> bits(most / 4);
  std::mt19937 random(1234u + unsigned(w.pe()));
  for (auto& x : bits) x = random();
  PROBE_CUDA(cudaMemcpy(b.src, bits.data(), most, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  PROBE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (w.pe() == 0) std::printf("%d PEs, %d calls a batch, median of %d batches\n", w.n_pes(), calls, kBatches);
  using enum shoal::reduce_op;
  rows<std::int8_t>(w, b, "int8", {sum, prod, min, max, bit_xor}, calls, stream);
  rows<std::uint8_t>(w, b, "uint8", {min, max}, calls, stream);
  rows<std::int16_t>(w, b, "int16", {sum, prod, min, max, bit_xor}, calls, stream);
  rows<std::int32_t>(w, b, "int32", {sum, min}, calls, stream);  // untouched by entry 87: the control
  rows<__nv_bfloat16>(w, b, "bfloat16", {sum}, calls, stream);
  PROBE_CUDA(cudaStreamDestroy(stream));
  barrier_all(w);
  w.free(b.src);
  w.free(b.dst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 50;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      calls = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: shoal-reduce-probe [--calls N]\n");
      return 2;
    }
  }
  if (calls < 1) {
    std::fprintf(stderr, "--calls takes a positive count\n");
    return 2;
  }
  return shoal::probe::main_reporting_errors([&] { return run(calls); });
}
