#include "host/work_queues.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace shoal::detail {

work_queue_count work_queues_from(const char* max_connections, bool under_mps) {
  const int fallback = under_mps ? kDefaultWorkQueuesUnderMps : kDefaultWorkQueues;
  const std::string defaulted = under_mps ? "CUDA's default for a client of MPS" : "CUDA's default";
  if (max_connections == nullptr || *max_connections == '\0') return {fallback, defaulted};
  int value = 0;
  const char* end = max_connections + std::strlen(max_connections);
  const auto [stop, ec] = std::from_chars(max_connections, end, value);
  if (ec != std::errc{} || stop != end || value < 1 || value > 32)
    return {fallback,
            fmt::format("{}; CUDA_DEVICE_MAX_CONNECTIONS={} is not from 1 to 32", defaulted, max_connections)};
  return {value, fmt::format("CUDA_DEVICE_MAX_CONNECTIONS={}", value)};
}

work_queue_count work_queues_of_process(int device) {
  int mps = 0;
  // A driver that does not know the attribute says nothing about MPS: no MPS assumed.
  if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, device) != cudaSuccess) (void)cudaGetLastError();
  return work_queues_from(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), mps != 0);
}

}  // namespace shoal::detail
