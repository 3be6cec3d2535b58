// The bulk copy under put and get: the scope's threads split the bytes, using the widest access both
// pointers allow (16 B when src and dst share their address modulo 16) with several loads in flight per
// thread. Works for any size and alignment; no synchronization inside.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shoal/dev/detail/spread.hpp"

namespace shoal::detail {

// How a copy's threads share it.
enum class copy_split {
  shared,         // every thread takes a share of each part: the collectives' copies, warp-scope put/get
  single_thread,  // one thread copies (rank 0 of 1) and takes the edges in pieces (copy_edge_pieces)
  spread,         // block- and grid-scope put/get, often a few warps' work for many threads: a thread with
                  // no share returns at once (and the caller rotates the ranks, detail::spread_rank)
};

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

// Edges: the bytes before dst's first V boundary and after its last (fewer than sizeof(V) each; src shares
// dst's offset modulo sizeof(V)). copy_aligned copies them byte by byte over the threads, one instruction
// for a warp. A copy by a single thread (thread-scope put, get and put_signal) asks for pieces instead:
// 8, 4, 2 or 1 bytes, each the widest that dst's alignment and the bytes left allow, so its 8-byte put
// leaves as one store, not eight, each behind its own load (perf notes 39). The collectives and the wider
// scopes keep the byte loops: spread over lanes they were faster, and the collectives' inlined paths slow
// down when this code grows.
template <typename T, bool kCoherent>
__device__ inline void copy_one(std::byte* dst, const std::byte* src) {
  *reinterpret_cast<T*>(dst) = copy_load<kCoherent>(reinterpret_cast<const T*>(src));
}

template <typename V, bool kCoherent>
__device__ inline void copy_edge_pieces(std::byte* dst, const std::byte* src, std::size_t bytes) {
  while (bytes != 0) {
    std::size_t width = sizeof(V) / 2;
    const auto at = reinterpret_cast<std::uintptr_t>(dst);
    while (width > 1 && ((at & (width - 1)) != 0 || width > bytes)) width /= 2;  // a mask: division is slow
    switch (width) {
      case 8:
        copy_one<unsigned long long, kCoherent>(dst, src);
        break;
      case 4:
        copy_one<unsigned, kCoherent>(dst, src);
        break;
      case 2:
        copy_one<unsigned short, kCoherent>(dst, src);
        break;
      default:
        copy_one<unsigned char, kCoherent>(dst, src);
    }
    dst += width;
    src += width;
    bytes -= width;
  }
}

template <typename V, bool kCoherent, copy_split kSplit>
__device__ inline void copy_aligned(std::byte* dst, const std::byte* src, std::size_t bytes, std::size_t rank,
                                    std::size_t size) {
  constexpr bool kPieces = kSplit == copy_split::single_thread && sizeof(V) >= 2;
  // A spread copy's thread with no share leaves at once. In a block of 1024 threads a small message keeps a
  // few warps busy, and the others' bookkeeping below, repeated for every message of a stream of calls,
  // bounded it (perf notes 45). The collectives' copies keep their code as it was: their paths move with
  // code shape.
  if constexpr (kSplit == copy_split::spread)
    if (!may_have_share(rank, bytes, sizeof(V))) return;
  // Head: bytes up to dst's first V boundary (src shares dst's offset modulo sizeof(V)).
  std::size_t head = (sizeof(V) - reinterpret_cast<std::uintptr_t>(dst) % sizeof(V)) % sizeof(V);
  if (head > bytes) head = bytes;
  if constexpr (kPieces)
    copy_edge_pieces<V, kCoherent>(dst, src, head);
  else
    for (std::size_t i = rank; i < head; i += size) dst[i] = copy_load<kCoherent>(src + i);
  std::size_t body = (bytes - head) / sizeof(V);
  copy_elements<V, kCoherent>(reinterpret_cast<V*>(dst + head), reinterpret_cast<const V*>(src + head), body, rank,
                              size);
  std::size_t done = head + body * sizeof(V);
  if constexpr (kPieces)
    copy_edge_pieces<V, kCoherent>(dst + done, src + done, bytes - done);
  else
    for (std::size_t i = done + rank; i < bytes; i += size) dst[i] = copy_load<kCoherent>(src + i);
}

template <bool kCoherent = false, copy_split kSplit = copy_split::shared>
__device__ inline void copy_bytes(void* dst_ptr, const void* src_ptr, std::size_t bytes, std::size_t rank,
                                  std::size_t size) {
  auto* dst = static_cast<std::byte*>(dst_ptr);
  auto* src = static_cast<const std::byte*>(src_ptr);
  std::uintptr_t mismatch = reinterpret_cast<std::uintptr_t>(dst) ^ reinterpret_cast<std::uintptr_t>(src);
  if (mismatch % 16 == 0)
    copy_aligned<uint4, kCoherent, kSplit>(dst, src, bytes, rank, size);
  else if (mismatch % 8 == 0)
    copy_aligned<uint2, kCoherent, kSplit>(dst, src, bytes, rank, size);
  else if (mismatch % 4 == 0)
    copy_aligned<unsigned, kCoherent, kSplit>(dst, src, bytes, rank, size);
  else if (mismatch % 2 == 0)
    copy_aligned<unsigned short, kCoherent, kSplit>(dst, src, bytes, rank, size);
  else
    copy_aligned<unsigned char, kCoherent, kSplit>(dst, src, bytes, rank, size);
}

}  // namespace shoal::detail
