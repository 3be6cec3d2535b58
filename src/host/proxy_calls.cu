// Host and on-stream RMA to other nodes (proxy_calls.hpp).
#include "host/cuda_check.hpp"
#include "host/proxy_calls.hpp"
#include "shoal/dev/ordering.cuh"
#include "shoal/dev/rma.cuh"
#include "shoal/dev/signal.cuh"

namespace shoal::detail {
namespace {

__global__ void put_kernel(device_handle h, void* dst, const void* src, std::size_t bytes, int pe) {
  put_bytes(thread_scope{}, h, dst, src, bytes, pe);
}
__global__ void get_kernel(device_handle h, void* dst, const void* src, std::size_t bytes, int pe) {
  get_bytes(thread_scope{}, h, dst, src, bytes, pe);
}
__global__ void put_signal_kernel(device_handle h, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                                  std::uint64_t value, sig_op op, int pe) {
  put_signal_bytes(thread_scope{}, h, dst, src, bytes, sig, value, op, pe);
}
__global__ void signal_kernel(device_handle h, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe) {
  signal_op(h, sig, value, op, pe);
}
__global__ void quiet_kernel(device_handle h) { proxy_quiet(h); }

// The engine reaches a request's local buffer with copies on its own stream, which suits device memory
// only (a CUDA copy between host buffers waits for the whole device, including the kernel waiting for
// the request). So a host buffer is staged through device memory allocated in stream order.
bool host_memory(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
}

// A device copy of [src, +bytes) made in stream order (null when src is device memory already).
void* stage_in(const void* src, std::size_t bytes, cudaStream_t stream) {
  if (!host_memory(src)) return nullptr;
  void* staged = nullptr;
  SHOAL_CUDA_CHECK(cudaMallocAsync(&staged, bytes, stream));
  SHOAL_CUDA_CHECK(cudaMemcpyAsync(staged, src, bytes, cudaMemcpyDefault, stream));
  return staged;
}

void release(void* staged, cudaStream_t stream) {
  if (staged != nullptr) SHOAL_CUDA_CHECK(cudaFreeAsync(staged, stream));
}

}  // namespace

void proxy_put_on_stream(world::impl& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream) {
  void* staged = stage_in(src, bytes, stream);
  put_kernel<<<1, 1, 0, stream>>>(w.device_handle(), dst, staged ? staged : src, bytes, pe);
  SHOAL_CUDA_CHECK(cudaGetLastError());
  release(staged, stream);
}

void proxy_get_on_stream(world::impl& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream) {
  void* staged = nullptr;
  if (host_memory(dst)) SHOAL_CUDA_CHECK(cudaMallocAsync(&staged, bytes, stream));
  get_kernel<<<1, 1, 0, stream>>>(w.device_handle(), staged ? staged : dst, src, bytes, pe);
  SHOAL_CUDA_CHECK(cudaGetLastError());
  if (staged != nullptr) SHOAL_CUDA_CHECK(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyDefault, stream));
  release(staged, stream);
}

void proxy_put_signal_on_stream(world::impl& w, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                                std::uint64_t value, sig_op op, int pe, cudaStream_t stream) {
  void* staged = bytes != 0 ? stage_in(src, bytes, stream) : nullptr;
  put_signal_kernel<<<1, 1, 0, stream>>>(w.device_handle(), dst, staged ? staged : src, bytes, sig, value, op, pe);
  SHOAL_CUDA_CHECK(cudaGetLastError());
  release(staged, stream);
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
