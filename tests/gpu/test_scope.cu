// The scopes' ranks and leaders in 1-, 2- and 3-D launches, including blocks whose last warp is partial:
// in every CTA block_scope's ranks are 0..size-1 once each, and exactly one thread leads, rank 0; across
// the grid grid_scope's ranks are 0..size-1 once each, and one thread leads, rank 0; warp_scope's rank
// is the thread's lane, which CUDA takes from the linear thread index. The leader tests are written for
// the compiler (lane first, perf notes 64), so they are checked here against the plain definitions.
#include <vector>

#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

struct scope_record {
  unsigned block_rank, block_leader, grid_rank, grid_leader, warp_rank;
};

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

  std::vector<int> grid_ranks_seen(n, 0);
  int grid_leaders = 0;
  for (unsigned cta = 0; cta < ctas; ++cta) {
    std::vector<int> block_ranks_seen(threads, 0);
    int block_leaders = 0;
    for (unsigned t = 0; t < threads; ++t) {
      const scope_record& r = got[std::size_t(cta) * threads + t];
      ASSERT_EQ(r.block_rank, t) << "CTA " << cta;  // the linear thread index
      ASSERT_LT(r.grid_rank, n);
      ++block_ranks_seen[r.block_rank];
      ++grid_ranks_seen[r.grid_rank];
      EXPECT_EQ(r.grid_rank, std::size_t(cta) * threads + t);
      EXPECT_EQ(r.warp_rank, t % 32) << "CTA " << cta << ", thread " << t;
      EXPECT_EQ(r.block_leader, t == 0 ? 1u : 0u) << "CTA " << cta << ", thread " << t;
      EXPECT_EQ(r.grid_leader, cta == 0 && t == 0 ? 1u : 0u) << "CTA " << cta << ", thread " << t;
      block_leaders += int(r.block_leader == 1);
      grid_leaders += int(r.grid_leader == 1);
    }
    EXPECT_EQ(block_leaders, 1) << "CTA " << cta;
    for (unsigned t = 0; t < threads; ++t) EXPECT_EQ(block_ranks_seen[t], 1) << "CTA " << cta << ", rank " << t;
  }
  EXPECT_EQ(grid_leaders, 1);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(grid_ranks_seen[i], 1) << "grid rank " << i;
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
