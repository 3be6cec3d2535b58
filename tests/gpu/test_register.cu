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

// A registration that one PE cannot make fails on every PE, and leaves no PE with the buffer registered;
// an unregistration that not every PE names alike fails on every PE too. Afterwards the world registers
// as before.
TEST(Register, BadRequestsFailOnEveryPE) {
  SHOAL_REQUIRE_WORLD(1);
  SHOAL_REQUIRE_ONE_NODE();
  shoal::world& w = *the_world();
  const std::size_t n = 1 << 20;
  std::byte* user = nullptr;
  ASSERT_EQ(cudaMalloc(&user, n), cudaSuccess);
  auto expect_failure = [&](auto call, const char* what, const char* needle) {
    try {
      call();
      ADD_FAILURE() << what << " was accepted";
    } catch (const shoal::error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << what << ": " << e.what();
    }
  };
  // Past the end of the CUDA allocation: RMA would reach whatever memory follows it.
  expect_failure([&] { w.register_buffer(user + 4096, n); }, "a buffer past its allocation", "past the end");
  EXPECT_THROW(w.ptr(user + 4096, 0), shoal::error) << "the failed registration left the buffer symmetric";
  if (w.n_pes() > 1) {
    // One PE's pointer is not device memory; the others' are fine.
    int on_host = 0;
    void* mine = w.pe() == 1 ? static_cast<void*>(&on_host) : static_cast<void*>(user);
    expect_failure([&] { w.register_buffer(mine, 4096); }, "a host pointer on PE 1",
                   w.pe() == 1 ? "not in a CUDA device allocation" : "PE 1 could not register");
    EXPECT_THROW(w.ptr(user, 0), shoal::error);
    // PE 1's buffer 4 bytes further into its allocation: an 8-byte word aligned on PE 0 would not be on PE 1.
    expect_failure([&] { w.register_buffer(user + (w.pe() == 1 ? 260 : 256), 4096); }, "buffers aligned unlike",
                   "aligned differently");
    EXPECT_THROW(w.ptr(user + 256, 0), shoal::error);
    // Registered everywhere, then unregistered by PE 0 alone: every PE fails, and the buffer stays registered.
    w.register_buffer(user, n);
    std::byte* other = nullptr;
    ASSERT_EQ(cudaMalloc(&other, 4096), cudaSuccess);
    w.register_buffer(other, 4096);
    expect_failure([&] { w.unregister_buffer(w.pe() == 0 ? user : other); }, "unregistering different buffers",
                   "disagree");
    EXPECT_NE(w.ptr(user, 0), nullptr) << "a mismatched unregistration took the buffer out";
    w.unregister_buffer(other);
    cudaFree(other);
  } else {
    w.register_buffer(user, n);
  }
  EXPECT_NE(w.ptr(user, 0), nullptr);
  w.unregister_buffer(user);
  cudaFree(user);
}

}  // namespace
}  // namespace shoal::gpu_test
