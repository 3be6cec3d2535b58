// The CUDA driver entry points shoal uses, fetched through the CUDA runtime at first use. libshoal never
// links libcuda, so it loads (and its CPU paths run) on machines without a GPU driver.
#pragma once

#include <cuda.h>

namespace shoal::detail {

struct driver_api {
  decltype(&::cuGetErrorString) get_error_string;
  decltype(&::cuDeviceGetAttribute) device_get_attribute;
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity;
  decltype(&::cuMemAddressReserve) mem_address_reserve;
  decltype(&::cuMemAddressFree) mem_address_free;
  decltype(&::cuMemCreate) mem_create;
  decltype(&::cuMemRelease) mem_release;
  decltype(&::cuMemMap) mem_map;
  decltype(&::cuMemUnmap) mem_unmap;
  decltype(&::cuMemSetAccess) mem_set_access;
  decltype(&::cuMemExportToShareableHandle) mem_export_to_shareable_handle;
  decltype(&::cuMemImportFromShareableHandle) mem_import_from_shareable_handle;
  decltype(&::cuStreamWriteValue64) stream_write_value64;
  decltype(&::cuStreamWaitValue64) stream_wait_value64;
  decltype(&::cuMemGetAddressRange) mem_get_address_range;
  decltype(&::cuModuleGetLoadingMode) module_get_loading_mode;
  decltype(&::cuLaunchKernelEx) launch_kernel_ex;
};

// Throws shoal::error(errc::cuda) if the runtime cannot find the driver or an entry point.
const driver_api& driver();

}  // namespace shoal::detail
