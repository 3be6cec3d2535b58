#include "host/local_copy.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "host/driver_api.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {

namespace {

// The bytes from `p` to the end of the allocation the driver says holds it (a cudaMalloc allocation, pinned
// host memory, or one mapping of VMM memory); 0 when the driver does not know `p` (pageable host memory,
// or none at all).
std::size_t bytes_to_allocation_end(const void* p) {
  const auto address = reinterpret_cast<CUdeviceptr>(p);
  CUdeviceptr base = 0;
  std::size_t size = 0;
  if (driver().mem_get_address_range(&base, &size, address) != CUDA_SUCCESS || base + size <= address) return 0;
  return base + size - address;
}

}  // namespace

void copy_with_local_buffer(void* dst, const void* src, std::size_t bytes, local_side local, cudaStream_t stream,
                            const char* call) {
  const cudaError_t status = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // reported here, so not again by whatever checks the last error next
  const void* buffer = local == local_side::source ? src : dst;
  if (status == cudaErrorInvalidValue) {
    // Only a diagnosis: a buffer that spans two mappings of VMM memory is shorter than `bytes` here too, but
    // CUDA copies that one (perf notes 84: it copies across adjacent mappings).
    const std::size_t to_end = bytes_to_allocation_end(buffer);
    if (to_end > 0 && to_end < bytes)
      throw error(errc::invalid_argument, call,
                  fmt::format("the local buffer [{}, +{} bytes) is shorter than the copy: CUDA refused it, as the "
                              "allocation it starts in holds {} bytes from there",
                              buffer, bytes, to_end));
  }
  throw error(errc::cuda, call,
              fmt::format("cudaMemcpyAsync of {} bytes from {} to {} failed: {} ({})", bytes, src, dst,
                          cudaGetErrorString(status), int(status)));
}

}  // namespace shoal::detail
