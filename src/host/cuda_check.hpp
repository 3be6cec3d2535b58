// Checking CUDA calls, in the three tiers the codebase uses:
//   SHOAL_CUDA_CHECK(call)      throws shoal::error(errc::cuda) naming the call (the normal host path)
//   SHOAL_CU_CHECK(call)        the same for driver-API calls (CUresult)
//   SHOAL_CUDA_LOG(call)        logs and carries on: destructors and cleanup paths, which must not throw
// This header stays free of fmt so .cu files (compiled by nvcc) can include it.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

#include "shoal/error.hpp"

namespace shoal::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cu_error(CUresult status, const char* call, const char* file, int line);
void log_cuda_error(cudaError_t status, const char* call, const char* file, int line) noexcept;

}  // namespace shoal::detail

#define SHOAL_CUDA_CHECK(call)                                                                                     \
  do {                                                                                                             \
    cudaError_t shoal_status_ = (call);                                                                            \
    if (shoal_status_ != cudaSuccess) ::shoal::detail::throw_cuda_error(shoal_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define SHOAL_CU_CHECK(call)                                                                                      \
  do {                                                                                                            \
    CUresult shoal_status_ = (call);                                                                              \
    if (shoal_status_ != CUDA_SUCCESS) ::shoal::detail::throw_cu_error(shoal_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define SHOAL_CUDA_LOG(call)                                                                                     \
  do {                                                                                                           \
    cudaError_t shoal_status_ = (call);                                                                          \
    if (shoal_status_ != cudaSuccess) ::shoal::detail::log_cuda_error(shoal_status_, #call, __FILE__, __LINE__); \
  } while (0)
