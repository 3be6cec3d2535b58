// What the launch and fence probes share to time work queued ahead of the GPU: a kernel that holds a
// stream until the host opens a gate, so that what the host enqueues behind it runs at the GPU's pace
// once the gate opens (or is enqueued without the GPU draining it meanwhile), and the configuration of a
// one-warp launch with or without programmatic dependent launch (PDL).
#pragma once

#include <cuda_runtime_api.h>

#include "probe_common.hpp"
#include "shoal/dev/detail/spin.cuh"

namespace shoal::probe {

static __global__ void held_kernel(volatile const int* open) {
  shoal::detail::spin_until([&] { return *open != 0; }, 10'000'000'000ull);  // 10 s: a forgotten gate ends
}

// A gate in mapped host memory. hold() closes it and enqueues held_kernel on the stream; open() lets the
// kernel finish.
class stream_gate {
 public:
  stream_gate() {
    PROBE_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&host_), sizeof(int), cudaHostAllocMapped));
    PROBE_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0));
  }
  ~stream_gate() { PROBE_CUDA(cudaFreeHost(host_)); }
  stream_gate(const stream_gate&) = delete;
  stream_gate& operator=(const stream_gate&) = delete;

  void hold(cudaStream_t stream) {
    *static_cast<volatile int*>(host_) = 0;
    held_kernel<<<1, 1, 0, stream>>>(device_);
    PROBE_CUDA(cudaGetLastError());
  }
  void open() { *static_cast<volatile int*>(host_) = 1; }

 private:
  int* host_ = nullptr;
  int* device_ = nullptr;
};

// cudaLaunchKernelEx's configuration for one CTA of one warp on `stream`, with the programmatic stream
// serialization attribute when `pdl`. Not copyable: `config` points at the attribute beside it.
struct one_warp_launch {
  cudaLaunchAttribute attribute{};
  cudaLaunchConfig_t config{};

  one_warp_launch(cudaStream_t stream, bool pdl) {
    config.gridDim = dim3(1);
    config.blockDim = dim3(32);
    config.stream = stream;
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = pdl ? 1 : 0;
  }
  one_warp_launch(const one_warp_launch&) = delete;
  one_warp_launch& operator=(const one_warp_launch&) = delete;
};

}  // namespace shoal::probe
