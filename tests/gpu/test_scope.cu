// The scopes' ranks and leaders in 1-, 2- and 3-D launches, including blocks whose last warp is partial:
// block_scope's and grid_scope's ranks are the linear thread indices (in the CTA, in the grid), each is led
// by its rank 0 alone, and warp_scope's rank is the lane, which CUDA takes from the linear thread index.
// The leader tests are written for the compiler (lane first, perf notes 64), so they are checked here
// against these plain definitions.
#include <cstddef>
#include <ostream>
#include <vector>

#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

struct scope_record {
  unsigned block_rank, block_leader, grid_rank, grid_leader, warp_rank;
  bool operator==(const scope_record&) const = default;
};

std::ostream& operator<<(std::ostream& os, const scope_record& r) {
  return os << "block rank " << r.block_rank << (r.block_leader ? " (leader)" : "") << ", grid rank " << r.grid_rank
            << (r.grid_leader ? " (leader)" : "") << ", warp rank " << r.warp_rank;
}

__global__ void record_scopes(scope_record* out) {
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  out[cta * blockDim.x * blockDim.y * blockDim.z + thread] = {
      block_scope::rank(), block_scope::leader(), grid_scope::rank(), grid_scope::leader(), warp_scope::rank()};
}

void check_scopes(dim3 grid, dim3 block) {
  const unsigned threads = block.x * block.y * block.z, ctas = grid.x * grid.y * grid.z;
  const std::size_t n = std::size_t(threads) * ctas;
  scope_record* records = nullptr;
  CUDA_OK(cudaMalloc(&records, n * sizeof(scope_record)));
  CUDA_OK(cudaMemset(records, 0xff, n * sizeof(scope_record)));  // a thread that writes nothing is seen
  record_scopes<<<grid, block>>>(records);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<scope_record> got(n);
  CUDA_OK(cudaMemcpy(got.data(), records, n * sizeof(scope_record), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(records));

  // What each thread should have recorded, from the plain definitions: ranks are linear indices, the
  // leaders are rank 0, and a warp's rank is the lane.
  int wrong = 0;
  for (unsigned cta = 0; cta < ctas; ++cta) {
    for (unsigned t = 0; t < threads; ++t) {
      const std::size_t i = std::size_t(cta) * threads + t;
      const scope_record want{t, t == 0, unsigned(i), i == 0, t % 32};
      if (got[i] == want) continue;
      if (++wrong <= 5)
        ADD_FAILURE() << "grid (" << grid.x << "," << grid.y << "," << grid.z << ") of blocks (" << block.x << ","
                      << block.y << "," << block.z << "), CTA " << cta << ", thread " << t << ": " << got[i]
                      << "; want " << want;
    }
  }
  EXPECT_EQ(wrong, 0) << "threads whose scopes are wrong";
}

TEST(Scope, RanksAndLeadersInOneDimensionalLaunches) {
  SHOAL_REQUIRE_WORLD(1);
  check_scopes(dim3(3), dim3(256));
  check_scopes(dim3(2), dim3(33));  // a last warp of one thread
  check_scopes(dim3(1), dim3(1));
}

TEST(Scope, RanksAndLeadersInMultiDimensionalLaunches) {
  SHOAL_REQUIRE_WORLD(1);
  check_scopes(dim3(2, 3), dim3(16, 4));  // lane 0 of a warp sits at threadIdx.x 0 and 16
  check_scopes(dim3(2, 2, 2), dim3(8, 4, 3));
  check_scopes(dim3(3, 1, 2), dim3(7, 5, 3));  // 105 threads: a partial last warp spanning rows
  check_scopes(dim3(1, 2), dim3(1, 40));       // threadIdx.x is 0 in every thread
}

}  // namespace
}  // namespace shoal::gpu_test
