// A deliberately small shoal program: every PE sends a block of numbers to the next PE in a ring with
// put_signal, waits for the block from the previous PE, and checks it.
//
//   shoalrun -n 2 -- ./ring_exchange
//
// What it shows: init and the symmetric heap on the host; a kernel taking the device handle by value;
// a block-scope put_signal whose data is visible when the receiver's wait returns.
#include <cstdio>
#include <vector>

#include "shoal/device.cuh"
#include "shoal/shoal.hpp"

__global__ void ring_exchange(shoal::device_handle h, int* inbox, const int* outbox, int count,
                              std::uint64_t* arrived) {
  int next = (shoal::my_pe(h) + 1) % shoal::n_pes(h);
  // The block copies `count` ints into `inbox` on the next PE, then sets its `arrived` signal to 1.
  shoal::put_signal(shoal::block, h, inbox, outbox, count, arrived, 1, shoal::sig_op::set, next);
  // Our own inbox is complete once our `arrived` reads 1.
  shoal::signal_wait_until(shoal::block, h, arrived, shoal::cmp::eq, 1);
}

int run() {
  shoal::world world = shoal::init();
  const int count = 1 << 16;
  int* inbox = world.malloc_array<int>(count);  // symmetric: the same object on every PE
  auto* arrived = static_cast<std::uint64_t*>(world.calloc(1, sizeof(std::uint64_t)));

  std::vector<int> mine(count);
  for (int i = 0; i < count; ++i) mine[i] = world.pe() * 1000003 + i;
  int* outbox = nullptr;  // any device memory can be a source
  if (cudaMalloc(&outbox, count * sizeof(int)) != cudaSuccess ||
      cudaMemcpy(outbox, mine.data(), count * sizeof(int), cudaMemcpyHostToDevice) != cudaSuccess) {
    std::fprintf(stderr, "CUDA allocation failed\n");
    return 1;
  }

  ring_exchange<<<1, 256>>>(world.device_handle(), inbox, outbox, count, arrived);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::fprintf(stderr, "kernel failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }

  std::vector<int> got(count);
  if (cudaMemcpy(got.data(), inbox, count * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::fprintf(stderr, "copy back failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  int prev = (world.pe() + world.n_pes() - 1) % world.n_pes();
  int wrong = 0;
  for (int i = 0; i < count; ++i) wrong += got[i] != prev * 1000003 + i;
  std::printf("PE %d received %d ints from PE %d: %s\n", world.pe(), count, prev, wrong ? "WRONG" : "ok");

  barrier_all(world);  // nobody frees while a peer may still write
  const bool freed = cudaFree(outbox) == cudaSuccess;
  world.free(arrived);
  world.free(inbox);
  return wrong || !freed ? 1 : 0;
}

int main() {
  try {
    return run();
  } catch (const shoal::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
