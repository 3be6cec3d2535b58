#include "host/driver_api.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "base/log.hpp"
#include "host/cuda_check.hpp"

namespace shoal::detail {
namespace {

template <typename Fn>
void resolve(Fn& fn, const char* symbol) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found{};
  // 12000: the ABI version these prototypes (from cuda.h) were introduced with or later.
  cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || address == nullptr)
    throw error(errc::cuda, "driver entry point",
                fmt::format("{} unavailable ({}); is the NVIDIA driver installed?", symbol,
                            status != cudaSuccess ? cudaGetErrorString(status) : "symbol not found"));
  fn = reinterpret_cast<Fn>(address);
}

driver_api load() {
  driver_api api{};
  resolve(api.get_error_string, "cuGetErrorString");
  resolve(api.device_get_attribute, "cuDeviceGetAttribute");
  resolve(api.mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  resolve(api.mem_address_reserve, "cuMemAddressReserve");
  resolve(api.mem_address_free, "cuMemAddressFree");
  resolve(api.mem_create, "cuMemCreate");
  resolve(api.mem_release, "cuMemRelease");
  resolve(api.mem_map, "cuMemMap");
  resolve(api.mem_unmap, "cuMemUnmap");
  resolve(api.mem_set_access, "cuMemSetAccess");
  resolve(api.mem_export_to_shareable_handle, "cuMemExportToShareableHandle");
  resolve(api.mem_import_from_shareable_handle, "cuMemImportFromShareableHandle");
  resolve(api.stream_write_value64, "cuStreamWriteValue64");
  resolve(api.stream_wait_value64, "cuStreamWaitValue64");
  resolve(api.mem_get_address_range, "cuMemGetAddressRange");
  resolve(api.module_get_loading_mode, "cuModuleGetLoadingMode");
  resolve(api.launch_kernel_ex, "cuLaunchKernelEx");
  return api;
}

}  // namespace

const driver_api& driver() {
  static const driver_api api = load();
  return api;
}

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw error(errc::cuda, call, fmt::format("{} ({}) at {}:{}", cudaGetErrorString(status), int(status), file, line));
}

[[noreturn]] void throw_cu_error(CUresult status, const char* call, const char* file, int line) {
  const char* text = "unknown driver error";
  try {
    driver().get_error_string(status, &text);
  } catch (...) {
  }
  throw error(errc::cuda, call, fmt::format("{} ({}) at {}:{}", text, int(status), file, line));
}

void log_cuda_error(cudaError_t status, const char* call, const char* file, int line) noexcept {
  SHOAL_LOG_WARN(base, "{} failed: {} at {}:{}", call, cudaGetErrorString(status), file, line);
}

}  // namespace shoal::detail
