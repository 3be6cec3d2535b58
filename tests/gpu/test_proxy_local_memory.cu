// The proxy's side of the GPU heap (transport/cuda_local_memory): what it stages in pinned memory stays
// there until the copy that reads it has run. The proxy's stream is held back behind a kernel that fills
// the GPU, so its copies are still queued when the proxy thread goes on.
#include <cstdint>
#include <vector>

#include "gpu_env.hpp"
#include "transport/cuda_local_memory.hpp"

namespace shoal::gpu_test {
namespace {

__global__ void spin_for(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// A flush that began before a staged write completes while the write's copy is still queued. The staging
// it used must not be handed out again then: a second write staged over it would land in place of the
// first (seen: the first MiB of the heap held the second write's bytes).
TEST(ProxyLocalMemory, StagingStaysTakenUntilItsCopyHasRun) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  std::byte* heap = nullptr;
  CUDA_OK(cudaMalloc(&heap, 4 * kBytes));
  CUDA_OK(cudaMemset(heap, 0, 4 * kBytes));
  CUDA_OK(cudaDeviceSynchronize());
  {
    const std::unique_ptr<detail::local_memory> memory = detail::make_cuda_local_memory(heap, 4 * kBytes, w.device(), {});
    cudaStream_t other = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    int sms = 0;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, w.device()));
    const std::vector<std::uint8_t> first = random_bytes(1500, kBytes), second = random_bytes(1501, kBytes);

    const std::uint64_t ticket = memory->flush_begin();
    spin_for<<<2 * sms, 1024, 0, other>>>(200'000'000);  // ~0.1 s on every SM
    CUDA_OK(cudaGetLastError());
    memory->signal(3 * kBytes, detail::proxy_signal_op::add, 1);  // a kernel on the proxy's stream: waits for an SM
    memory->write(detail::local_ref::heap(0), first.data(), kBytes);
    while (!memory->flushed(ticket)) {
    }
    // The race needs the proxy's stream still held back here: its signal kernel not yet run.
    std::uint64_t signal_word = 1;
    cudaStream_t reader = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking));
    CUDA_OK(cudaMemcpyAsync(&signal_word, heap + 3 * kBytes, sizeof signal_word, cudaMemcpyDeviceToHost, reader));
    CUDA_OK(cudaStreamSynchronize(reader));
    CUDA_OK(cudaStreamDestroy(reader));
    memory->write(detail::local_ref::heap(kBytes), second.data(), kBytes);
    memory->flush();
    CUDA_OK(cudaStreamSynchronize(other));
    CUDA_OK(cudaStreamDestroy(other));
    EXPECT_TRUE(download(heap, kBytes) == first) << "the first write's bytes were replaced";
    EXPECT_TRUE(download(heap + kBytes, kBytes) == second);
    if (signal_word != 0) {
      CUDA_OK(cudaFree(heap));
      GTEST_SKIP() << "the proxy's stream ran before the second write (the GPU was not full): the race this "
                      "test looks for had no window";
    }
  }
  CUDA_OK(cudaFree(heap));
}

}  // namespace
}  // namespace shoal::gpu_test
