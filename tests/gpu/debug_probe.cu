// Built with SHOAL_DEBUG: runs one deliberate misuse of the device API and lets it trap, so a ctest can
// check the report names the file, the PE and the bad value. Modes: bad-pe, outside-heap, wait-timeout.
// Exits 77 (skip) without a GPU.
#include <cstdio>
#include <cstring>

#include "shoal/device.cuh"
#include "shoal/shoal.hpp"

namespace {

__global__ void bad_pe_kernel(shoal::device_handle h, int* sym) { shoal::p(h, sym, 1, h.n_pes + 3); }

__global__ void outside_heap_kernel(shoal::device_handle h, int* not_symmetric) { shoal::p(h, not_symmetric, 1, h.pe); }

__global__ void wait_timeout_kernel(shoal::device_handle h, unsigned long long* word) {
  shoal::wait_until(h, word, shoal::cmp::eq, 42ull);  // nobody ever writes 42
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no GPU\n");
    return 77;
  }
  const char* mode = argc > 1 ? argv[1] : "";
  shoal::world w = shoal::init();
  auto* sym = static_cast<int*>(w.calloc(16, sizeof(int)));
  int* plain = nullptr;
  if (cudaMalloc(&plain, 64) != cudaSuccess) return 2;
  if (std::strcmp(mode, "bad-pe") == 0)
    bad_pe_kernel<<<1, 1>>>(w.device_handle(), sym);
  else if (std::strcmp(mode, "outside-heap") == 0)
    outside_heap_kernel<<<1, 1>>>(w.device_handle(), plain);
  else if (std::strcmp(mode, "wait-timeout") == 0)
    wait_timeout_kernel<<<1, 1>>>(w.device_handle(), reinterpret_cast<unsigned long long*>(sym));
  else {
    std::fprintf(stderr, "usage: %s bad-pe|outside-heap|wait-timeout\n", argv[0]);
    return 2;
  }
  cudaError_t status = cudaDeviceSynchronize();
  std::printf("kernel ended: %s\n", cudaGetErrorString(status));
  std::fflush(stdout);
  // The context is unusable after a trap: leave without finalizing.
  std::_Exit(status == cudaSuccess ? 0 : 1);
}
