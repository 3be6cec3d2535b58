// User buffers registered into the symmetric space: device put/get and host put/get into the peer's
// registered cudaMalloc buffer, ptr(), mismatched sizes, and unregistering.
#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

__global__ void __launch_bounds__(512)
    put_into_registered(device_handle h, std::byte* dst, const std::byte* src, std::size_t n, int pe, int* ptr_ok) {
  put_bytes(block, h, dst, src, n, pe);
  if (threadIdx.x == 0) *ptr_ok = ptr(h, dst, pe) != nullptr && ptr(h, dst, h.pe) == dst;
}

TEST(Register, UserBufferActsSymmetric) {
  SHOAL_REQUIRE_WORLD(1);
  SHOAL_REQUIRE_ONE_NODE();
  shoal::world& w = *the_world();
  const std::size_t n = (1u << 20) + 13, padding = 4096;
  std::byte *user = nullptr, *src = nullptr;
  int* ptr_ok = nullptr;
  ASSERT_EQ(cudaMalloc(&user, n + 2 * padding), cudaSuccess);  // registered at an offset inside the allocation
  ASSERT_EQ(cudaMalloc(&src, n), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ptr_ok, sizeof(int)), cudaSuccess);
  std::byte* buffer = user + padding;
  w.register_buffer(buffer, n);

  upload(src, random_bytes(31 + w.pe(), n));
  put_into_registered<<<1, 512>>>(w.device_handle(), buffer, src, n, next_pe(w), ptr_ok);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  barrier_all(w);
  EXPECT_EQ(first_mismatch(download(buffer, n), random_bytes(31 + prev_pe(w), n)), -1);
  int ok = 0;
  ASSERT_EQ(cudaMemcpy(&ok, ptr_ok, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(ok, 1);

  // Host forms reach it too.
  auto host_data = random_bytes(77 + w.pe(), 4096);
  barrier_all(w);
  put(w, buffer + 100, host_data.data(), host_data.size(), next_pe(w));
  barrier_all(w);
  std::vector<std::uint8_t> back(4096);
  get(w, back.data(), buffer + 100, back.size(), next_pe(w));
  EXPECT_EQ(first_mismatch(back, host_data), -1);
  EXPECT_NE(w.ptr(buffer, next_pe(w)), nullptr);
  barrier_all(w);

  if (w.n_pes() > 1) {
    try {
      w.register_buffer(src, 1000 + w.pe());
      ADD_FAILURE() << "mismatched registration accepted";
    } catch (const shoal::error& e) {
      EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
    }
  }
  w.unregister_buffer(buffer);
  EXPECT_THROW(w.ptr(buffer, 0), shoal::error);  // no longer symmetric
  EXPECT_THROW(w.unregister_buffer(buffer), shoal::error);
  cudaFree(ptr_ok);
  cudaFree(src);
  cudaFree(user);
}

}  // namespace
}  // namespace shoal::gpu_test
