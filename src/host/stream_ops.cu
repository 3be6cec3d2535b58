// Stream-ordered RMA, signals, waits and barriers (shoal/stream.hpp).
#include <algorithm>
#include <vector>

#include "host/cuda_check.hpp"
#include "host/driver_api.hpp"
#include "host/proxy_calls.hpp"
#include "host/world_impl.hpp"
#include "shoal/dev/barrier.cuh"
#include "shoal/dev/signal.cuh"
#include "shoal/stream.hpp"

namespace shoal {
namespace {

__global__ void signal_add_kernel(std::uint64_t* remote_sig, std::uint64_t value) {
  detail::update_signal(remote_sig, value, sig_op::add, cuda::memory_order_release);
}

__global__ void signal_wait_kernel(device_handle h, const std::uint64_t* sig, cmp op, std::uint64_t value) {
  wait_until(h, sig, op, value);
}

__global__ void barrier_kernel(device_handle h) { barrier_all(warp, h); }

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  SHOAL_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status == cudaStreamCaptureStatusActive;
}

// Signal update in stream order, after everything before it on the stream. A stream write carries a
// memory barrier by default, so the data of an earlier copy is visible before the new value.
void enqueue_signal(std::uint64_t* remote_sig, std::uint64_t value, sig_op op, cudaStream_t stream) {
  if (op == sig_op::set) {
    SHOAL_CU_CHECK(detail::driver().stream_write_value64(stream, reinterpret_cast<CUdeviceptr>(remote_sig), value, 0));
  } else {
    signal_add_kernel<<<1, 1, 0, stream>>>(remote_sig, value);
    SHOAL_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

namespace {
void require_stream_ordered(const void* local, const char* call) {
  if (detail::is_pageable(local))
    throw error(errc::invalid_argument, call,
                "the local buffer is pageable host memory: copying it would block the call and cannot be "
                "captured in a CUDA graph; use device memory or pinned host memory (cudaMallocHost / "
                "cudaHostRegister)");
}
}  // namespace

// PEs on other nodes: the device call in a one-thread kernel on the stream (proxy_calls.hpp).
bool through_proxy(world& w, int pe, const void* symmetric, std::size_t bytes, const char* call) {
  world::impl& s = w.internals();
  if (!s.proxy || !s.on_other_node(pe)) return false;
  s.offset_of(symmetric, bytes, call);  // on another node only heap objects are reachable
  return true;
}

void put_on_stream(world& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream) {
  if (through_proxy(w, pe, dst, bytes, "shoal::put_on_stream")) {
    if (bytes != 0) require_stream_ordered(src, "shoal::put_on_stream");
    if (bytes != 0) detail::proxy_put_on_stream(w.internals(), dst, src, bytes, pe, stream);
    return;
  }
  void* remote = w.internals().reachable(dst, bytes, pe, "shoal::put_on_stream");
  if (bytes != 0) require_stream_ordered(src, "shoal::put_on_stream");
  if (bytes != 0) SHOAL_CUDA_CHECK(cudaMemcpyAsync(remote, src, bytes, cudaMemcpyDefault, stream));
}

void get_on_stream(world& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream) {
  if (through_proxy(w, pe, src, bytes, "shoal::get_on_stream")) {
    if (bytes != 0) require_stream_ordered(dst, "shoal::get_on_stream");
    if (bytes != 0) detail::proxy_get_on_stream(w.internals(), dst, src, bytes, pe, stream);
    return;
  }
  void* remote = w.internals().reachable(src, bytes, pe, "shoal::get_on_stream");
  if (bytes != 0) require_stream_ordered(dst, "shoal::get_on_stream");
  if (bytes != 0) SHOAL_CUDA_CHECK(cudaMemcpyAsync(dst, remote, bytes, cudaMemcpyDefault, stream));
}

void put_signal_on_stream(world& w, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                          std::uint64_t value, sig_op op, int pe, cudaStream_t stream) {
  if (through_proxy(w, pe, sig, sizeof(std::uint64_t), "shoal::put_signal_on_stream")) {
    w.internals().offset_of(dst, bytes, "shoal::put_signal_on_stream");
    if (bytes != 0) require_stream_ordered(src, "shoal::put_signal_on_stream");
    detail::proxy_put_signal_on_stream(w.internals(), dst, src, bytes, sig, value, op, pe, stream);
    return;
  }
  auto* remote_sig = static_cast<std::uint64_t*>(
      w.internals().reachable(sig, sizeof(std::uint64_t), pe, "shoal::put_signal_on_stream"));
  put_on_stream(w, dst, src, bytes, pe, stream);
  enqueue_signal(remote_sig, value, op, stream);
}

void signal_op_on_stream(world& w, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe, cudaStream_t stream) {
  if (through_proxy(w, pe, sig, sizeof(std::uint64_t), "shoal::signal_op_on_stream"))
    return detail::proxy_signal_on_stream(w.internals(), sig, value, op, pe, stream);
  auto* remote_sig = static_cast<std::uint64_t*>(
      w.internals().reachable(sig, sizeof(std::uint64_t), pe, "shoal::signal_op_on_stream"));
  enqueue_signal(remote_sig, value, op, stream);
}

void signal_wait_until_on_stream(world& w, std::uint64_t* sig, cmp op, std::uint64_t value, cudaStream_t stream) {
  world::impl& s = w.internals();
  s.reachable(sig, sizeof(std::uint64_t), w.pe(), "shoal::signal_wait_until_on_stream");
  if (op == cmp::ge || op == cmp::eq) {
    unsigned flags = op == cmp::ge ? CU_STREAM_WAIT_VALUE_GEQ : CU_STREAM_WAIT_VALUE_EQ;
    SHOAL_CU_CHECK(detail::driver().stream_wait_value64(stream, reinterpret_cast<CUdeviceptr>(sig), value, flags));
  } else {
    signal_wait_kernel<<<1, 1, 0, stream>>>(w.device_handle(), sig, op, value);
    SHOAL_CUDA_CHECK(cudaGetLastError());
  }
}

// Load/store and copy-engine operations are complete in stream order; requests to other nodes are not.
void quiet_on_stream(world& w, cudaStream_t stream) {
  world::impl& s = w.internals();
  s.require_device("shoal::quiet_on_stream");
  if (s.proxy) detail::proxy_quiet_on_stream(s, stream);
}

void barrier_all_on_stream(world& w, cudaStream_t stream) {
  world::impl& s = w.internals();
  s.require_device("shoal::barrier_all_on_stream");
  // Stream memory operations reach only mapped peers: across nodes the barrier is a kernel's.
  if (capturing(stream) || s.proxy) {
    barrier_kernel<<<1, 32, 0, stream>>>(w.device_handle());
    SHOAL_CUDA_CHECK(cudaGetLastError());
    return;
  }
  // Announce my arrival at this epoch in flag[my_pe] of every other PE, then wait for every other PE's.
  // All of it goes to the GPU as batches of memory operations: one command per batch instead of one per
  // operation. This PE's own arrival needs no operation: stream order already has it.
  std::uint64_t epoch = ++s.stream_barrier_epoch;
  int me = w.pe();
  std::vector<CUstreamBatchMemOpParams> ops;
  ops.reserve(2 * std::size_t(w.n_pes()));
  for (int pe = 0; pe < w.n_pes(); ++pe) {
    if (pe == me) continue;
    CUstreamBatchMemOpParams op{};
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    op.writeValue.address = reinterpret_cast<CUdeviceptr>(
        s.reachable(s.stream_barrier_flags + me, sizeof(std::uint64_t), pe, "shoal::barrier_all_on_stream"));
    op.writeValue.value64 = epoch;
    ops.push_back(op);
  }
  for (int pe = 0; pe < w.n_pes(); ++pe) {
    if (pe == me) continue;
    CUstreamBatchMemOpParams op{};
    op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    op.waitValue.address = reinterpret_cast<CUdeviceptr>(s.stream_barrier_flags + pe);
    op.waitValue.value64 = epoch;
    op.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    ops.push_back(op);
  }
  if (ops.empty()) return;  // a world of one PE
  const detail::driver_api& cu = detail::driver();
  constexpr std::size_t kMaxBatch = 256;  // the driver's limit on operations per batch
  for (std::size_t at = 0; at < ops.size(); at += kMaxBatch)
    SHOAL_CU_CHECK(cu.stream_batch_mem_op(stream, unsigned(std::min(kMaxBatch, ops.size() - at)), ops.data() + at, 0));
}

}  // namespace shoal
