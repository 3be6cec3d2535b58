// Barriers inside kernels at thread, warp, block and grid scope, many in a row: each round every PE
// writes a value into every other PE and, after the barrier, must see every PE's value of that round.
#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

constexpr int kRounds = 50;

template <typename Scope>
__global__ void barrier_rounds(device_handle h, int* slots, int* errors) {
  Scope scope;
  for (int r = 1; r <= kRounds; ++r) {
    bool writer = std::is_same_v<Scope, grid_scope> ? grid_scope::leader() : Scope::leader();
    if (writer)
      for (int pe = 0; pe < h.n_pes; ++pe) p(h, slots + (r % 2) * h.n_pes + h.pe, r, pe);
    barrier_all(scope, h);
    // Every PE's round-r value is here. (Alternating rows: round r+1 writes the other row, so a fast
    // PE cannot overwrite what a slow one still checks.)
    if (writer)
      for (int pe = 0; pe < h.n_pes; ++pe)
        if (reinterpret_cast<volatile int*>(slots)[(r % 2) * h.n_pes + pe] != r) atomicAdd(errors, 1);
    barrier_all(scope, h);
  }
}

template <typename Scope>
void check_barrier(unsigned blocks, unsigned threads) {
  shoal::world& w = *the_world();
  int* slots = static_cast<int*>(w.calloc(2 * w.n_pes(), sizeof(int)));
  int* errors = nullptr;
  ASSERT_EQ(cudaMalloc(&errors, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(errors, 0, sizeof(int)), cudaSuccess);
  barrier_rounds<Scope><<<blocks, threads>>>(w.device_handle(), slots, errors);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int got = -1;
  ASSERT_EQ(cudaMemcpy(&got, errors, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, 0);
  barrier_all(w);
  cudaFree(errors);
  w.free(slots);
}

TEST(Barrier, ThreadScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_barrier<thread_scope>(1, 1);
}
TEST(Barrier, WarpScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_barrier<warp_scope>(1, 32);
}
TEST(Barrier, BlockScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_barrier<block_scope>(1, 256);
}
TEST(Barrier, GridScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_barrier<grid_scope>(16, 128);
}

TEST(Barrier, OnStreamAndHostInterleaved) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  auto* value = static_cast<int*>(w.calloc(w.n_pes(), sizeof(int)));
  int* mine = nullptr;  // stream-ordered copies need device or pinned memory
  ASSERT_EQ(cudaMallocHost(&mine, sizeof(int)), cudaSuccess);
  int pageable = 0;
  EXPECT_THROW(put_on_stream(w, value, &pageable, sizeof(int), 0, s), shoal::error);
  for (int r = 1; r <= 20; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    *mine = r * 10 + w.pe();
    for (int pe = 0; pe < w.n_pes(); ++pe) put_on_stream(w, value + w.pe(), mine, sizeof(int), pe, s);
    barrier_all_on_stream(w, s);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<int> got(w.n_pes());
    ASSERT_EQ(cudaMemcpy(got.data(), value, got.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int pe = 0; pe < w.n_pes(); ++pe) EXPECT_EQ(got[pe], r * 10 + pe) << "round " << r;
    barrier_all(w);
  }
  cudaStreamDestroy(s);
  cudaFreeHost(mine);
  w.free(value);
}

}  // namespace
}  // namespace shoal::gpu_test
