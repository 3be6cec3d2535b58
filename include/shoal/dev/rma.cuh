// Remote memory access from a kernel: ptr, put/get (bytes or typed; blocking and _nbi), p/g.
// Addresses are symmetric: `dst` of a put (or `src` of a get) is the caller's own address of a heap
// object, and the call reaches the same object on PE `pe`. Local buffers may be any device memory; to a
// PE on another node (through the proxy), a local buffer the proxy copies later (a put of more than 8
// bytes, any get) must be global memory, not __shared__ or a local array: such a call traps naming it.
//
// Completion contract (OpenSHMEM 1.5):
//   put      on return the source may be overwritten; the data is visible at `pe` only after quiet()
//            (or is ordered before a later put_signal/fence-separated put to that PE).
//   put_nbi  the same, except the source may be reused only after quiet().
//   get      on return the data is in `dst` (for every thread of the scope).
//   get_nbi  the data is in `dst` after quiet().
// Scope: every thread of the scope calls with the same arguments; the scope's threads share the copy.
// There is no barrier on entry: a thread may copy bytes another thread of the scope wrote to `src` (or
// still reads in `dst`, for a get), so the caller meets first when that happens (docs/device-api.md).
// At grid scope each CTA returns when its own share is done: meet with grid_sync() or a barrier first
// if one CTA must see another's share.
// PEs on other nodes (ptr() is null) are reached through the proxy (dev/detail/proxy.cuh) with the same
// contract: the scope's leader (each CTA's leader at grid scope) posts the request, and the blocking
// forms wait for it. Only heap objects, not registered buffers, are reachable there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shoal/dev/detail/check.cuh"
#include "shoal/dev/detail/copy.cuh"
#include "shoal/dev/detail/proxy.cuh"
#include "shoal/dev/detail/spread.hpp"
#include "shoal/dev/scope.cuh"
#include "shoal/device_handle.hpp"

namespace shoal {

__device__ inline int my_pe(const device_handle& h) { return h.pe; }
__device__ inline int n_pes(const device_handle& h) { return h.n_pes; }

namespace detail {
// ptr() for addresses outside the heap: a registered buffer's mapping on `pe`, or nullptr.
template <typename T>
__device__ inline T* registered_ptr(const device_handle& h, T* p, int local) {
  if (h.registered == nullptr) return nullptr;
  auto* b = reinterpret_cast<const std::byte*>(p);
  for (int i = 0; i < h.registered->count; ++i) {
    const registered_buffer& r = h.registered->entries[i];
    if (b >= r.base && std::uint64_t(b - r.base) < r.bytes)
      return reinterpret_cast<T*>(const_cast<std::byte*>(r.peers[local] + (b - r.base)));
  }
  return nullptr;
}
}  // namespace detail

// The address of symmetric object `p` on PE `pe`, usable with plain loads and stores, or nullptr when
// that PE's memory is not mapped here (another node). For heap objects it is one add when the node's
// PEs are numbered contiguously; registered buffers are found in a short table.
template <typename T>
__device__ inline T* ptr(const device_handle& h, T* p, int pe) {
  SHOAL_CHECK_PE(h, pe);
  SHOAL_CHECK_SYMMETRIC(h, p, 0);
  int local;
  if (h.node_contiguous) {
    local = pe - h.node_first_pe;
    if (local < 0 || local >= h.local_size) return nullptr;
  } else {
    local = h.local_index[pe];
    if (local < 0) return nullptr;
  }
  auto* bytes = reinterpret_cast<std::byte*>(const_cast<std::remove_cv_t<T>*>(p));
  // The whole slot (not only what is mapped now) belongs to the heap, so handles stay valid as it grows.
  if (bytes < h.heap_base || bytes - h.heap_base >= h.slot_stride) return detail::registered_ptr(h, p, local);
  return reinterpret_cast<T*>(bytes + std::int64_t(local - h.local_pe) * h.slot_stride);
}

namespace detail {

// The remote address for load/store access; traps (debug builds) when `pe` is not reachable. Callers
// that may target other nodes test ptr() and take the proxy path instead.
template <typename T>
__device__ inline T* remote(const device_handle& h, T* p, int pe) {
  T* r = ptr(h, p, pe);
  SHOAL_DEVICE_CHECK(h, r != nullptr, "pe not load/store reachable", pe);
  return r;
}

// A put or get to a PE on another node: the calling thread's share is posted, and with `wait` it waits
// for its completion (source reusable, or data landed).
template <typename Scope>
__device__ inline void proxy_scope_transfer(const device_handle& h, proxy_op op, void* remote, void* local,
                                            std::size_t bytes, int pe, bool wait) {
  std::size_t begin, end;
  if (!proxy_share<Scope>(bytes, begin, end) || begin == end) return;
  const char* call = op == proxy_op::put ? "put" : "get";
  const std::uint64_t ticket = proxy_transfer(h, op, static_cast<std::byte*>(remote) + begin,
                                              static_cast<std::byte*>(local) + begin, end - begin, pe, call);
  if (wait) proxy_await(h, ticket, call, pe);
}

// Block and grid scope spread their copies: each starts at a warp hashed from its address
// (detail::spread_rank), and threads with no share return at once. One thread takes its edges in pieces.
template <typename Scope>
__device__ inline void scope_copy(Scope, void* dst, const void* src, std::size_t bytes) {
  if constexpr (std::is_same_v<Scope, block_scope> || std::is_same_v<Scope, grid_scope>)
    copy_bytes</*kCoherent=*/false, copy_split::spread>(dst, src, bytes, spread_rank(Scope::rank(), Scope::size(), dst),
                                                        Scope::size());
  else if constexpr (std::is_same_v<Scope, thread_scope>)
    copy_bytes</*kCoherent=*/false, copy_split::single_thread>(dst, src, bytes, 0, 1);
  else
    copy_bytes</*kCoherent=*/false, copy_split::shared>(dst, src, bytes, Scope::rank(), Scope::size());
}

}  // namespace detail

// ---- bytes --------------------------------------------------------------------------------------------

namespace detail {
template <typename Scope>
__device__ inline void put_bytes(Scope scope, const device_handle& h, void* dst, const void* src, std::size_t bytes,
                                 int pe, bool wait) {
  SHOAL_CHECK_SYMMETRIC(h, dst, bytes);
  if (void* to = ptr(h, dst, pe))
    scope_copy(scope, to, src, bytes);
  else
    proxy_scope_transfer<Scope>(h, proxy_op::put, dst, const_cast<void*>(src), bytes, pe, wait);
}
template <typename Scope>
__device__ inline void get_bytes(Scope scope, const device_handle& h, void* dst, const void* src, std::size_t bytes,
                                 int pe, bool wait) {
  SHOAL_CHECK_SYMMETRIC(h, src, bytes);
  if (const void* from = ptr(h, src, pe))
    scope_copy(scope, dst, from, bytes);
  else
    proxy_scope_transfer<Scope>(h, proxy_op::get, const_cast<void*>(src), dst, bytes, pe, wait);
}
}  // namespace detail

template <typename Scope>
__device__ inline void put_bytes_nbi(Scope scope, const device_handle& h, void* dst, const void* src, std::size_t bytes,
                                     int pe) {
  detail::put_bytes(scope, h, dst, src, bytes, pe, false);
}

template <typename Scope>
__device__ inline void put_bytes(Scope scope, const device_handle& h, void* dst, const void* src, std::size_t bytes,
                                 int pe) {
  detail::put_bytes(scope, h, dst, src, bytes, pe, true);
  Scope::sync();  // every thread's share is issued: the source is reusable by any thread of the scope
}

template <typename Scope>
__device__ inline void get_bytes_nbi(Scope scope, const device_handle& h, void* dst, const void* src, std::size_t bytes,
                                     int pe) {
  detail::get_bytes(scope, h, dst, src, bytes, pe, false);
}

template <typename Scope>
__device__ inline void get_bytes(Scope scope, const device_handle& h, void* dst, const void* src, std::size_t bytes,
                                 int pe) {
  detail::get_bytes(scope, h, dst, src, bytes, pe, true);
  Scope::sync();  // every thread's share has landed in dst
}

// ---- typed: `count` elements of T ---------------------------------------------------------------------

template <typename Scope, typename T>
__device__ inline void put(Scope scope, const device_handle& h, T* dst, const T* src, std::size_t count, int pe) {
  put_bytes(scope, h, dst, src, detail::typed_bytes<T>(h, count), pe);
}
template <typename Scope, typename T>
__device__ inline void put_nbi(Scope scope, const device_handle& h, T* dst, const T* src, std::size_t count, int pe) {
  put_bytes_nbi(scope, h, dst, src, detail::typed_bytes<T>(h, count), pe);
}
template <typename Scope, typename T>
__device__ inline void get(Scope scope, const device_handle& h, T* dst, const T* src, std::size_t count, int pe) {
  get_bytes(scope, h, dst, src, detail::typed_bytes<T>(h, count), pe);
}
template <typename Scope, typename T>
__device__ inline void get_nbi(Scope scope, const device_handle& h, T* dst, const T* src, std::size_t count, int pe) {
  get_bytes_nbi(scope, h, dst, src, detail::typed_bytes<T>(h, count), pe);
}

// ---- scalars (one thread) -----------------------------------------------------------------------------

// Stores `value` into symmetric `*dst` on `pe`. Visible there after quiet(), ordered by fence().
template <typename T>
__device__ inline void p(const device_handle& h, T* dst, T value, int pe) {
  SHOAL_CHECK_SYMMETRIC(h, dst, sizeof(T));
  if (T* to = ptr(h, dst, pe))
    *static_cast<volatile T*>(to) = value;
  else
    detail::proxy_p(h, dst, value, pe);
}

// Loads symmetric `*src` from `pe`.
template <typename T>
__device__ inline T g(const device_handle& h, const T* src, int pe) {
  SHOAL_CHECK_SYMMETRIC(h, src, sizeof(T));
  if (const T* from = ptr(h, src, pe)) return *static_cast<const volatile T*>(from);
  return detail::proxy_g(h, src, pe);
}

}  // namespace shoal
