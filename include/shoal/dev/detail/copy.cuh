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

// Edges: the bytes before dst's first V boundary and after its last (fewer than sizeof(V) each; src shares
// dst's offset modulo sizeof(V)). copy_aligned copies them byte by byte over the threads, unless asked for
// pieces (put, get and put_signal ask): then they go in pieces of 8, 4, 2 or 1 bytes, each the widest that
// dst's alignment and the bytes left allow, so an 8-byte put leaves as one store, not eight. A thread
// loads all its pieces before it stores any, so their load latencies overlap. The collectives keep the
// byte loops: their edges are rare (odd sizes, unaligned buffers) and their inlined paths slow down when
// this code grows (perf notes 39).
template <typename V, typename Piece>
__device__ inline void for_each_edge_piece(const std::byte* dst, std::size_t bytes, std::size_t rank, std::size_t size,
                                           Piece piece) {
  // Offsets run from dst's place in its V-aligned block, so `at`'s alignment is dst's.
  const std::size_t lead = reinterpret_cast<std::uintptr_t>(dst) % sizeof(V), end = lead + bytes;
  std::size_t owner = 0;  // the thread that takes the next piece: pieces go round the threads
  for (std::size_t at = lead; at < end;) {
    std::size_t width = sizeof(V) / 2;
    while (width > 1 && ((at & (width - 1)) != 0 || at + width > end)) width /= 2;  // no division: it is slow
    if (owner == rank) piece(at - lead, at, width);
    if (++owner == size) owner = 0;
    at += width;
  }
}

template <typename V, bool kCoherent>
__device__ inline void copy_edge_pieces(std::byte* dst, const std::byte* src, std::size_t bytes, std::size_t rank,
                                        std::size_t size) {
  static_assert(sizeof(V) >= 2 && sizeof(V) <= 16);
  if (bytes == 0) return;
  std::uint64_t lo = 0, hi = 0;  // this thread's pieces, at their places in the 16-byte frame of the block
  for_each_edge_piece<V>(dst, bytes, rank, size, [&](std::size_t offset, std::size_t at, std::size_t width) {
    const std::byte* from = src + offset;
    std::uint64_t v;
    switch (width) {
      case 8:
        v = copy_load<kCoherent>(reinterpret_cast<const unsigned long long*>(from));
        break;
      case 4:
        v = copy_load<kCoherent>(reinterpret_cast<const unsigned*>(from));
        break;
      case 2:
        v = copy_load<kCoherent>(reinterpret_cast<const unsigned short*>(from));
        break;
      default:
        v = copy_load<kCoherent>(reinterpret_cast<const unsigned char*>(from));
    }
    (at >= 8 ? hi : lo) |= v << (8 * (at % 8));
  });
  for_each_edge_piece<V>(dst, bytes, rank, size, [&](std::size_t offset, std::size_t at, std::size_t width) {
    const std::uint64_t v = (at >= 8 ? hi : lo) >> (8 * (at % 8));
    std::byte* to = dst + offset;
    switch (width) {
      case 8:
        *reinterpret_cast<std::uint64_t*>(to) = v;
        break;
      case 4:
        *reinterpret_cast<std::uint32_t*>(to) = std::uint32_t(v);
        break;
      case 2:
        *reinterpret_cast<std::uint16_t*>(to) = std::uint16_t(v);
        break;
      default:
        *to = std::byte(v & 0xff);
    }
  });
}

template <typename V, bool kCoherent, bool kWideEdges>
__device__ inline void copy_aligned(std::byte* dst, const std::byte* src, std::size_t bytes, std::size_t rank,
                                    std::size_t size) {
  constexpr bool kPieces = kWideEdges && sizeof(V) >= 2;
  // Head: bytes up to dst's first V boundary (src shares dst's offset modulo sizeof(V)).
  std::size_t head = (sizeof(V) - reinterpret_cast<std::uintptr_t>(dst) % sizeof(V)) % sizeof(V);
  if (head > bytes) head = bytes;
  if constexpr (kPieces)
    copy_edge_pieces<V, kCoherent>(dst, src, head, rank, size);
  else
    for (std::size_t i = rank; i < head; i += size) dst[i] = copy_load<kCoherent>(src + i);
  std::size_t body = (bytes - head) / sizeof(V);
  copy_elements<V, kCoherent>(reinterpret_cast<V*>(dst + head), reinterpret_cast<const V*>(src + head), body, rank,
                              size);
  std::size_t done = head + body * sizeof(V);
  if constexpr (kPieces)
    copy_edge_pieces<V, kCoherent>(dst + done, src + done, bytes - done, rank, size);
  else
    for (std::size_t i = done + rank; i < bytes; i += size) dst[i] = copy_load<kCoherent>(src + i);
}

// kWideEdges: copy the edges in pieces (copy_edge_pieces) rather than byte by byte.
template <bool kCoherent = false, bool kWideEdges = false>
__device__ inline void copy_bytes(void* dst_ptr, const void* src_ptr, std::size_t bytes, std::size_t rank,
                                  std::size_t size) {
  auto* dst = static_cast<std::byte*>(dst_ptr);
  auto* src = static_cast<const std::byte*>(src_ptr);
  std::uintptr_t mismatch = reinterpret_cast<std::uintptr_t>(dst) ^ reinterpret_cast<std::uintptr_t>(src);
  if (mismatch % 16 == 0)
    copy_aligned<uint4, kCoherent, kWideEdges>(dst, src, bytes, rank, size);
  else if (mismatch % 8 == 0)
    copy_aligned<uint2, kCoherent, kWideEdges>(dst, src, bytes, rank, size);
  else if (mismatch % 4 == 0)
    copy_aligned<unsigned, kCoherent, kWideEdges>(dst, src, bytes, rank, size);
  else if (mismatch % 2 == 0)
    copy_aligned<unsigned short, kCoherent, kWideEdges>(dst, src, bytes, rank, size);
  else
    copy_aligned<unsigned char, kCoherent, kWideEdges>(dst, src, bytes, rank, size);
}

}  // namespace shoal::detail
