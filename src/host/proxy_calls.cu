// Host and on-stream RMA to other nodes (proxy_calls.hpp).
#include "host/cuda_check.hpp"
#include "host/proxy_calls.hpp"
#include "shoal/dev/ordering.cuh"
#include "shoal/dev/rma.cuh"
#include "shoal/dev/signal.cuh"

namespace shoal::detail {
namespace {

// Blocking device calls of one thread, for a PE on another node. `on_host`: the local buffer is host
// memory, which the proxy then copies with the CPU (its copies on the GPU's copy engines cannot take a
// host buffer on both ends without waiting for every kernel).
__global__ void put_kernel(device_handle h, void* dst, const void* src, std::size_t bytes, int pe, bool on_host) {
  proxy_await(h, proxy_transfer(h, proxy_op::put, dst, const_cast<void*>(src), bytes, pe, "put", on_host), "put", pe);
}
__global__ void get_kernel(device_handle h, void* dst, const void* src, std::size_t bytes, int pe, bool on_host) {
  proxy_await(h, proxy_transfer(h, proxy_op::get, const_cast<void*>(src), dst, bytes, pe, "get", on_host), "get", pe);
}
__global__ void put_signal_kernel(device_handle h, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                                  std::uint64_t value, sig_op op, int pe, bool on_host) {
  proxy_await(h, proxy_put_signal(h, dst, src, bytes, sig, value, op, pe, on_host), "put_signal", pe);
}
__global__ void signal_kernel(device_handle h, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe) {
  signal_op(h, sig, value, op, pe);
}
__global__ void quiet_kernel(device_handle h) { proxy_quiet(h); }

}  // namespace

void proxy_put_on_stream(world::impl& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream) {
  put_kernel<<<1, 1, 0, stream>>>(w.device_handle(), dst, src, bytes, pe, is_host_memory(src));
  SHOAL_CUDA_CHECK(cudaGetLastError());
}

void proxy_get_on_stream(world::impl& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream) {
  get_kernel<<<1, 1, 0, stream>>>(w.device_handle(), dst, src, bytes, pe, is_host_memory(dst));
  SHOAL_CUDA_CHECK(cudaGetLastError());
}

void proxy_put_signal_on_stream(world::impl& w, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                                std::uint64_t value, sig_op op, int pe, cudaStream_t stream) {
  put_signal_kernel<<<1, 1, 0, stream>>>(w.device_handle(), dst, src, bytes, sig, value, op, pe,
                                         bytes != 0 && is_host_memory(src));
  SHOAL_CUDA_CHECK(cudaGetLastError());
}

void proxy_signal_on_stream(world::impl& w, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe,
                            cudaStream_t stream) {
  signal_kernel<<<1, 1, 0, stream>>>(w.device_handle(), sig, value, op, pe);
  SHOAL_CUDA_CHECK(cudaGetLastError());
}

void proxy_quiet_on_stream(world::impl& w, cudaStream_t stream) {
  quiet_kernel<<<1, 1, 0, stream>>>(w.device_handle());
  SHOAL_CUDA_CHECK(cudaGetLastError());
}

void preload_proxy_kernels() {
  // With lazy module loading a kernel's first launch may wait for running kernels: load them up front.
  cudaFuncAttributes a{};
  SHOAL_CUDA_CHECK(cudaFuncGetAttributes(&a, put_kernel));
  SHOAL_CUDA_CHECK(cudaFuncGetAttributes(&a, get_kernel));
  SHOAL_CUDA_CHECK(cudaFuncGetAttributes(&a, put_signal_kernel));
  SHOAL_CUDA_CHECK(cudaFuncGetAttributes(&a, signal_kernel));
  SHOAL_CUDA_CHECK(cudaFuncGetAttributes(&a, quiet_kernel));
}

void proxy_synchronize(world::impl& w, cudaStream_t stream) {
  const cudaError_t status = cudaStreamSynchronize(stream);
  if (status == cudaSuccess) return;
  if (w.proxy) w.proxy->check();
  throw_cuda_error(status, "cudaStreamSynchronize", __FILE__, __LINE__);
}

}  // namespace shoal::detail
