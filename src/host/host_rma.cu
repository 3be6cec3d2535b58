// Host-initiated blocking RMA and atomics (shoal/host_rma.hpp).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "bootstrap/pe_vote.hpp"
#include "host/cuda_check.hpp"
#include "host/local_copy.hpp"
#include "host/proxy_calls.hpp"
#include "host/world_impl.hpp"
#include "shoal/dev/atomic.cuh"
#include "shoal/host_rma.hpp"

namespace shoal {
namespace {

template <typename T>
__global__ void host_atomic_kernel(device_handle h, atomic_kind kind, T* target, T operand, T cond, int pe, T* result) {
  T previous{};
  switch (kind) {
    case atomic_kind::fetch:
      previous = atomic_fetch(h, target, pe);
      break;
    case atomic_kind::set:
      atomic_set(h, target, operand, pe);
      break;
    case atomic_kind::swap:
      previous = atomic_swap(h, target, operand, pe);
      break;
    case atomic_kind::fetch_add:
      previous = atomic_fetch_add(h, target, operand, pe);
      break;
    case atomic_kind::compare_swap:
    case atomic_kind::fetch_and:
    case atomic_kind::fetch_or:
    case atomic_kind::fetch_xor:
      if constexpr (atomic_integer<T>) {
        if (kind == atomic_kind::compare_swap) previous = atomic_compare_swap(h, target, cond, operand, pe);
        if (kind == atomic_kind::fetch_and) previous = atomic_fetch_and(h, target, operand, pe);
        if (kind == atomic_kind::fetch_or) previous = atomic_fetch_or(h, target, operand, pe);
        if (kind == atomic_kind::fetch_xor) previous = atomic_fetch_xor(h, target, operand, pe);
      }
      break;
  }
  *result = previous;
}

}  // namespace

namespace {

// Copies between a peer's heap and local memory (device, pinned or pageable host memory) on the world's
// stream and waits for it.
void blocking_copy(world::impl& s, void* dst, const void* src, std::size_t bytes, detail::local_side local,
                   const char* call) {
  detail::copy_with_local_buffer(dst, src, bytes, local, s.stream, call);
  SHOAL_CUDA_CHECK(cudaStreamSynchronize(s.stream));
}

}  // namespace

// PEs on other nodes: the device call in a one-thread kernel on the world's stream (proxy_calls.hpp).
void put(world& w, void* dst, const void* src, std::size_t bytes, int pe) {
  world::impl& s = w.internals();
  if (s.nothing_to_move(dst, bytes, pe, "shoal::put")) return;
  detail::check_local_buffer(src, bytes, "shoal::put");
  if (s.proxy && s.on_other_node(pe)) {
    s.offset_of(dst, bytes, "shoal::put");
    if (bytes == 0) return;
    detail::proxy_put_on_stream(s, dst, src, bytes, pe, s.stream);
    return detail::proxy_synchronize(s, s.stream);
  }
  void* remote = s.reachable(dst, bytes, pe, "shoal::put");
  if (detail::copy_needed(remote, src, bytes, "shoal::put"))
    blocking_copy(s, remote, src, bytes, detail::local_side::source, "shoal::put");
}

void get(world& w, void* dst, const void* src, std::size_t bytes, int pe) {
  world::impl& s = w.internals();
  if (s.nothing_to_move(src, bytes, pe, "shoal::get")) return;
  detail::check_local_buffer(dst, bytes, "shoal::get");
  if (s.proxy && s.on_other_node(pe)) {
    s.offset_of(src, bytes, "shoal::get");
    if (bytes == 0) return;
    detail::proxy_get_on_stream(s, dst, src, bytes, pe, s.stream);
    return detail::proxy_synchronize(s, s.stream);
  }
  void* remote = s.reachable(src, bytes, pe, "shoal::get");
  if (detail::copy_needed(dst, remote, bytes, "shoal::get"))
    blocking_copy(s, dst, remote, bytes, detail::local_side::destination, "shoal::get");
}

void quiet(world& w) {
  world::impl& s = w.internals();
  s.require_device("shoal::quiet");
  if (s.proxy) detail::proxy_quiet_on_stream(s, s.stream);  // host atomics to other nodes that fetch nothing
  detail::proxy_synchronize(s, s.stream);
  s.host_atomics_posted = false;
}

void barrier_all(world& w) {
  world::impl& s = w.internals();
  // A vote rather than a plain barrier: a PE whose share fails (its context died under a trapped kernel, say)
  // fails the call on every PE, instead of leaving the others waiting until the bootstrap's timeout or letting
  // them pass by matching a later barrier of its own, such as its world's teardown.
  detail::run_on_every_pe(*s.boot, "shoal::barrier_all", "complete its work", [&] {
    // The contract covers the host atomics to other nodes that were only posted (atomic_set): complete them.
    if (s.host_atomics_posted) quiet(w);
    if (s.device != kNoDevice) SHOAL_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  });
}

namespace {
// The call as errors name it (add and inc run as fetch_add).
const char* atomic_call(atomic_kind kind) {
  switch (kind) {
    case atomic_kind::fetch:
      return "shoal::atomic_fetch";
    case atomic_kind::set:
      return "shoal::atomic_set";
    case atomic_kind::swap:
      return "shoal::atomic_swap";
    case atomic_kind::compare_swap:
      return "shoal::atomic_compare_swap";
    case atomic_kind::fetch_add:
      return "shoal::atomic_fetch_add";
    case atomic_kind::fetch_and:
      return "shoal::atomic_fetch_and";
    case atomic_kind::fetch_or:
      return "shoal::atomic_fetch_or";
    case atomic_kind::fetch_xor:
      return "shoal::atomic_fetch_xor";
  }
  return nullptr;
}
}  // namespace

template <host_atomic_arithmetic T>
T host_atomic(world& w, atomic_kind kind, T* target, T operand, T cond, int pe) {
  const char* call = atomic_call(kind);
  // host_atomic is public: a kind outside the enumeration, or a bit operation on a float, would run nothing.
  if (call == nullptr)
    throw error(errc::invalid_argument, "shoal::host_atomic",
                "atomic kind " + std::to_string(static_cast<int>(kind)) + " is not a shoal::atomic_kind");
  if (!host_atomic_integer<T> && kind != atomic_kind::fetch && kind != atomic_kind::set && kind != atomic_kind::swap &&
      kind != atomic_kind::fetch_add)
    throw error(errc::invalid_argument, call, "defined on integer types only");
  world::impl& s = w.internals();
  if (s.proxy && s.on_other_node(pe)) {
    s.check_pe(pe, call);
    s.offset_of(target, sizeof(T), call);  // on another node only heap objects are reachable
  } else {
    s.reachable(target, sizeof(T), pe, call);
  }
  if (reinterpret_cast<std::uintptr_t>(target) % sizeof(T) != 0)
    throw error(errc::invalid_argument, call, "target is not aligned to " + std::to_string(sizeof(T)) + " bytes");
  // One result slot and one stream per world: host threads making atomics at once take turns.
  std::lock_guard lock(s.atomic_mutex);
  if (s.proxy && s.on_other_node(pe))
    s.host_atomics_posted |= kind == atomic_kind::set;  // posted, not waited for: quiet or barrier_all completes it
  T* result = static_cast<T*>(s.atomic_result);         // mapped pinned memory: the kernel writes it directly
  host_atomic_kernel<<<1, 1, 0, s.stream>>>(w.device_handle(), kind, target, operand, cond, pe, result);
  SHOAL_CUDA_CHECK(cudaGetLastError());
  detail::proxy_synchronize(s, s.stream);
  return *static_cast<volatile T*>(result);
}

#define SHOAL_INSTANTIATE_HOST_ATOMIC(T) template T host_atomic<T>(world&, atomic_kind, T*, T, T, int);
SHOAL_INSTANTIATE_HOST_ATOMIC(int)
SHOAL_INSTANTIATE_HOST_ATOMIC(unsigned)
SHOAL_INSTANTIATE_HOST_ATOMIC(long)
SHOAL_INSTANTIATE_HOST_ATOMIC(unsigned long)
SHOAL_INSTANTIATE_HOST_ATOMIC(long long)
SHOAL_INSTANTIATE_HOST_ATOMIC(unsigned long long)
SHOAL_INSTANTIATE_HOST_ATOMIC(float)
SHOAL_INSTANTIATE_HOST_ATOMIC(double)
#undef SHOAL_INSTANTIATE_HOST_ATOMIC

}  // namespace shoal
