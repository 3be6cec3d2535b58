// Stream-ordered RMA, signals, waits and barriers (shoal/stream.hpp).
#include <cstdio>
#include <string>

#include "coll/stream_common.hpp"
#include "host/cuda_check.hpp"
#include "host/driver_api.hpp"
#include "host/local_copy.hpp"
#include "host/proxy_calls.hpp"
#include "host/world_impl.hpp"
#include "shoal/dev/barrier.cuh"
#include "shoal/dev/signal.cuh"
#include "shoal/stream.hpp"

namespace shoal {
namespace {

// The stream operations' kernels are programmatic dependent launches when SHOAL_COLL_PDL is on: the host
// enqueues such a launch faster, and their calls under graph replay take 1.03 µs instead of 1.72 (perf notes
// 71). So each waits for the previous kernel before it touches memory (having first let the next launch
// begin: a one-thread grid costs nothing to hold resident). The update is a release: the previous kernels'
// writes, complete when the wait returns, reach the peer first.
template <sig_op kOp>
__global__ void signal_update_kernel(std::uint64_t* remote_sig, std::uint64_t value) {
  detail::release_next_launch_then_await_previous();
  detail::update_signal(remote_sig, value, kOp, cuda::memory_order_release);
}

__global__ void signal_wait_kernel(device_handle h, const std::uint64_t* sig, cmp op, std::uint64_t value) {
  detail::release_next_launch_then_await_previous();
  wait_until(h, sig, op, value);
}

__global__ void barrier_kernel(device_handle h) { barrier_all(warp, h); }

// barrier_all_on_stream within a node. Everything before it on the stream has finished when the wait
// returns; release arrival stores then order those writes before the flags (a kernel boundary alone makes
// them visible to this GPU, not to the peers). At a kernel's start they cost ~0.1 µs less than a fence
// followed by relaxed stores (perf notes 69). Its flags and epoch are not the device barrier's, so a
// kernel's barrier_all running beside it on another stream does not meet it by mistake.
__global__ void stream_barrier_kernel(device_handle h, std::uint64_t* flags) {
  detail::await_previous_kernel();
  detail::meet_all_pes<false>(warp, h, detail::earlier_writes::release_each, flags, &h.sync->stream_barrier_epoch);
}

// Whether work enqueued on `stream` now goes into a graph being captured.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  SHOAL_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status == cudaStreamCaptureStatusActive;
}

// Signal update in stream order, after everything before it on the stream. A set is a stream write when
// called directly: the host enqueues one in ~1.3 µs where a kernel takes ~3.8, and queued ahead of the GPU
// it is 0.3 µs cheaper too. Captured in a graph, a stream write costs 2.4 µs per replay and the kernel 0.9,
// so there a set is the kernel (perf notes 72; asking whether the stream is capturing cost a direct set
// ~0.07 µs of the host's time). A stream write carries a memory barrier by default, so the data of an
// earlier copy is visible before the new value.
void enqueue_signal(world& w, std::uint64_t* remote_sig, std::uint64_t value, sig_op op, cudaStream_t stream,
                    const char* call) {
  const bool overlap = w.internals().cfg.coll_pdl;
  if (op == sig_op::add)
    detail::launch_on_stream(overlap, signal_update_kernel<sig_op::add>, {1, 1}, stream, call, remote_sig, value);
  else if (capturing(stream))
    detail::launch_on_stream(overlap, signal_update_kernel<sig_op::set>, {1, 1}, stream, call, remote_sig, value);
  else
    SHOAL_CU_CHECK(detail::driver().stream_write_value64(stream, reinterpret_cast<CUdeviceptr>(remote_sig), value, 0));
}

}  // namespace

namespace {
void require_stream_ordered(const void* local, std::size_t bytes, const char* call) {
  detail::check_local_buffer(local, bytes, call, detail::local_buffer_use::stream_ordered);
}
// A sig_op or cmp cast from a number outside its enumeration: an op would run as a set, a comparison would never
// hold and its wait would trap at the timeout.
void require_sig_op(sig_op op, const char* call) {
  if (op == sig_op::set || op == sig_op::add) return;
  throw error(errc::invalid_argument, call,
              "signal operation " + std::to_string(static_cast<int>(op)) + " is not a shoal::sig_op (set, add)");
}
void require_cmp(cmp op, const char* call) {
  const int value = static_cast<int>(op);
  if (value >= static_cast<int>(cmp::eq) && value <= static_cast<int>(cmp::le)) return;
  throw error(errc::invalid_argument, call,
              "comparison " + std::to_string(value) + " is not a shoal::cmp (eq, ne, gt, ge, lt, le)");
}
// A signal word is a 64-bit atomic: misaligned, the kernel that updates or waits on it would fault and
// take the CUDA context with it.
void require_signal_word(const std::uint64_t* sig, const char* call) {
  if (reinterpret_cast<std::uintptr_t>(sig) % alignof(std::uint64_t) == 0) return;
  char text[80];
  std::snprintf(text, sizeof text, "the signal word %p is not 8-byte aligned", static_cast<const void*>(sig));
  throw error(errc::invalid_argument, call, text);
}
}  // namespace

// PEs on other nodes: the device call in a one-thread kernel on the stream (proxy_calls.hpp).
bool through_proxy(world& w, int pe, const void* symmetric, std::size_t bytes, const char* call) {
  world::impl& s = w.internals();
  if (!s.proxy || !s.on_other_node(pe)) return false;
  s.offset_of(symmetric, bytes, call);  // on another node only heap objects are reachable
  return true;
}

namespace {
// The data half of put_on_stream and put_signal_on_stream; `call` names the caller in errors.
void put_on_stream_as(world& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream,
                      const char* call) {
  if (w.internals().nothing_to_move(dst, bytes, pe, call)) return;
  if (through_proxy(w, pe, dst, bytes, call)) {
    require_stream_ordered(src, bytes, call);
    if (bytes != 0) detail::proxy_put_on_stream(w.internals(), dst, src, bytes, pe, stream);
    return;
  }
  void* remote = w.internals().reachable(dst, bytes, pe, call);
  require_stream_ordered(src, bytes, call);
  if (detail::copy_needed(remote, src, bytes, call))
    detail::copy_with_local_buffer(remote, src, bytes, detail::local_side::source, stream, call);
}
}  // namespace

void put_on_stream(world& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream) {
  put_on_stream_as(w, dst, src, bytes, pe, stream, "shoal::put_on_stream");
}

void get_on_stream(world& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream) {
  constexpr const char* call = "shoal::get_on_stream";
  if (w.internals().nothing_to_move(src, bytes, pe, call)) return;
  if (through_proxy(w, pe, src, bytes, call)) {
    require_stream_ordered(dst, bytes, call);
    if (bytes != 0) detail::proxy_get_on_stream(w.internals(), dst, src, bytes, pe, stream);
    return;
  }
  void* remote = w.internals().reachable(src, bytes, pe, call);
  require_stream_ordered(dst, bytes, call);
  if (detail::copy_needed(dst, remote, bytes, call))
    detail::copy_with_local_buffer(dst, remote, bytes, detail::local_side::destination, stream, call);
}

void put_signal_on_stream(world& w, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                          std::uint64_t value, sig_op op, int pe, cudaStream_t stream) {
  constexpr const char* call = "shoal::put_signal_on_stream";
  require_signal_word(sig, call);
  require_sig_op(op, call);
  if (through_proxy(w, pe, sig, sizeof(std::uint64_t), call)) {
    if (!w.internals().nothing_to_move(dst, bytes, pe, call)) w.internals().offset_of(dst, bytes, call);
    require_stream_ordered(src, bytes, call);
    if (bytes == 0) return detail::proxy_signal_on_stream(w.internals(), sig, value, op, pe, stream);  // no data
    detail::proxy_put_signal_on_stream(w.internals(), dst, src, bytes, sig, value, op, pe, stream);
    return;
  }
  auto* remote_sig = static_cast<std::uint64_t*>(w.internals().reachable(sig, sizeof(std::uint64_t), pe, call));
  put_on_stream_as(w, dst, src, bytes, pe, stream, call);
  enqueue_signal(w, remote_sig, value, op, stream, call);
}

void signal_op_on_stream(world& w, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe, cudaStream_t stream) {
  require_signal_word(sig, "shoal::signal_op_on_stream");
  require_sig_op(op, "shoal::signal_op_on_stream");
  if (through_proxy(w, pe, sig, sizeof(std::uint64_t), "shoal::signal_op_on_stream"))
    return detail::proxy_signal_on_stream(w.internals(), sig, value, op, pe, stream);
  auto* remote_sig = static_cast<std::uint64_t*>(
      w.internals().reachable(sig, sizeof(std::uint64_t), pe, "shoal::signal_op_on_stream"));
  enqueue_signal(w, remote_sig, value, op, stream, "shoal::signal_op_on_stream");
}

void signal_wait_until_on_stream(world& w, std::uint64_t* sig, cmp op, std::uint64_t value, cudaStream_t stream) {
  world::impl& s = w.internals();
  require_signal_word(sig, "shoal::signal_wait_until_on_stream");
  require_cmp(op, "shoal::signal_wait_until_on_stream");
  s.reachable(sig, sizeof(std::uint64_t), w.pe(), "shoal::signal_wait_until_on_stream");
  if (op == cmp::ge || op == cmp::eq) {
    unsigned flags = op == cmp::ge ? CU_STREAM_WAIT_VALUE_GEQ : CU_STREAM_WAIT_VALUE_EQ;
    SHOAL_CU_CHECK(detail::driver().stream_wait_value64(stream, reinterpret_cast<CUdeviceptr>(sig), value, flags));
  } else {
    detail::launch_on_stream(s.cfg.coll_pdl, signal_wait_kernel, {1, 1}, stream, "shoal::signal_wait_until_on_stream",
                             w.device_handle(), sig, op, value);
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
  if (w.n_pes() == 1) return;  // stream order is the whole barrier
  // Across nodes the device barrier reaches peers through the proxy. Within a node a one-warp kernel meets
  // on flags of its own, overlapped with the previous kernel's launch: 3.4 us of the GPU's time per barrier,
  // where one batch of stream memory operations (a write and a wait per peer) took 5-7 us (perf notes 36).
  if (s.proxy) {
    detail::launch_on_stream(false, barrier_kernel, {1, 32}, stream, "shoal::barrier_all_on_stream", w.device_handle());
    return;
  }
  detail::launch_on_stream(s.cfg.coll_pdl, stream_barrier_kernel, {1, 32}, stream, "shoal::barrier_all_on_stream",
                           w.device_handle(), s.stream_barrier_flags);
}

}  // namespace shoal
