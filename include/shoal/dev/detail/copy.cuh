// The bulk copy under put and get: the scope's threads split the bytes, using the widest access both
// pointers allow (16 B when src and dst share their address modulo 16) with several loads in flight per
// thread. Works for any size and alignment; no synchronization inside.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace shoal::detail {

// Loads of the copies. kCoherent loads bypass L1 (ld.global.cg), for memory that other GPUs write while
// the kernel runs (L1 is not coherent with them).
template <bool kCoherent, typename V>
__device__ inline V copy_load(const V* p) {
  if constexpr (kCoherent && std::is_same_v<V, std::byte>)
    return std::byte(__ldcg(reinterpret_cast<const unsigned char*>(p)));
  else if constexpr (kCoherent)
    return __ldcg(p);
  else
    return *p;
}

// Copies `count` elements of V with `rank`/`size` threads; several independent loads in flight per
// thread (128 bytes), issued before the stores, hide remote latency.
template <typename V, bool kCoherent = false>
__device__ inline void copy_elements(V* dst, const V* src, std::size_t count, std::size_t rank, std::size_t size) {
  constexpr int kUnroll = sizeof(V) >= 16 ? 8 : 4;
  std::size_t i = rank;
  for (; i + (kUnroll - 1) * size < count; i += kUnroll * size) {
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = copy_load<kCoherent>(src + i + u * size);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * size] = v[u];
  }
  for (; i < count; i += size) dst[i] = copy_load<kCoherent>(src + i);
}

template <typename T, bool kCoherent>
__device__ inline void copy_one(std::byte* dst, const std::byte* src) {
  *reinterpret_cast<T*>(dst) = copy_load<kCoherent>(reinterpret_cast<const T*>(src));
}

// Copies the `bytes` before dst's first V boundary, or after its last (fewer than sizeof(V); src shares
// dst's offset modulo sizeof(V)): pieces of 8, 4, 2 or 1 bytes, each the widest that dst's alignment and
// the bytes left allow, one piece per thread. An 8-byte edge then leaves as one store, not eight.
template <typename V, bool kCoherent>
__device__ inline void copy_edge(std::byte* dst, const std::byte* src, std::size_t bytes, std::size_t rank,
                                 std::size_t size) {
  std::size_t owner = 0;  // the thread that copies the next piece: pieces go round the threads
  while (bytes != 0) {
    std::size_t width = sizeof(V) > 1 ? sizeof(V) / 2 : 1;
    while (width > 1 && (reinterpret_cast<std::uintptr_t>(dst) % width != 0 || width > bytes)) width /= 2;
    if (owner == rank) {
      switch (width) {
        case 8: copy_one<unsigned long long, kCoherent>(dst, src); break;
        case 4: copy_one<unsigned, kCoherent>(dst, src); break;
        case 2: copy_one<unsigned short, kCoherent>(dst, src); break;
        default: copy_one<unsigned char, kCoherent>(dst, src);
      }
    }
    if (++owner == size) owner = 0;
    dst += width;
    src += width;
    bytes -= width;
  }
}

template <typename V, bool kCoherent = false>
__device__ inline void copy_aligned(std::byte* dst, const std::byte* src, std::size_t bytes, std::size_t rank,
                                    std::size_t size) {
  // Head: bytes up to dst's first V boundary (src shares dst's offset modulo sizeof(V)).
  std::size_t head = (sizeof(V) - reinterpret_cast<std::uintptr_t>(dst) % sizeof(V)) % sizeof(V);
  if (head > bytes) head = bytes;
  copy_edge<V, kCoherent>(dst, src, head, rank, size);
  std::size_t body = (bytes - head) / sizeof(V);
  copy_elements<V, kCoherent>(reinterpret_cast<V*>(dst + head), reinterpret_cast<const V*>(src + head), body, rank,
                              size);
  const std::size_t done = head + body * sizeof(V);
  copy_edge<V, kCoherent>(dst + done, src + done, bytes - done, rank, size);
}

template <bool kCoherent = false>
__device__ inline void copy_bytes(void* dst_ptr, const void* src_ptr, std::size_t bytes, std::size_t rank,
                                  std::size_t size) {
  auto* dst = static_cast<std::byte*>(dst_ptr);
  auto* src = static_cast<const std::byte*>(src_ptr);
  std::uintptr_t mismatch = reinterpret_cast<std::uintptr_t>(dst) ^ reinterpret_cast<std::uintptr_t>(src);
  if (mismatch % 16 == 0)
    copy_aligned<uint4, kCoherent>(dst, src, bytes, rank, size);
  else if (mismatch % 8 == 0)
    copy_aligned<uint2, kCoherent>(dst, src, bytes, rank, size);
  else if (mismatch % 4 == 0)
    copy_aligned<unsigned, kCoherent>(dst, src, bytes, rank, size);
  else if (mismatch % 2 == 0)
    copy_aligned<unsigned short, kCoherent>(dst, src, bytes, rank, size);
  else
    copy_aligned<unsigned char, kCoherent>(dst, src, bytes, rank, size);
}

}  // namespace shoal::detail
