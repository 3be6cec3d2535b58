// The CUDA half of the consumer: a translation unit compiled by nvcc that includes shoal's headers and
// links against the same runtime (no -rdc, no device library). The device API's own headers are compiled
// by the generated per-header sources; this file only has to build and, where there is a GPU, run.
#include <cuda_runtime.h>

#include <cstdio>

#include <shoal/error.hpp>

namespace {
__global__ void add_one(int* value) { *value += 1; }
}  // namespace

int device_part() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("consumer: no GPU here, device part compiled but not run\n");
    return 0;
  }
  int* value = nullptr;
  int host = 41;
  if (cudaMalloc(&value, sizeof(int)) != cudaSuccess) return 1;
  cudaMemcpy(value, &host, sizeof(int), cudaMemcpyHostToDevice);
  add_one<<<1, 1>>>(value);
  cudaError_t rc = cudaMemcpy(&host, value, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(value);
  if (rc != cudaSuccess || host != 42) {
    std::fprintf(stderr, "consumer: kernel did not run: %s, value %d\n", cudaGetErrorString(rc), host);
    return 1;
  }
  std::printf("consumer: kernel ran on the GPU\n");
  return 0;
}
