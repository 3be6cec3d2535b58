// The data loops of the collectives: a unit-wide reduction of several sources into several destinations,
// in 16-byte words with several loads in flight when every pointer allows it, element by element
// otherwise. Loads bypass L1 (ld.global.cg): sources are peers' memory or scratch that peers write, and
// L1 is not coherent with them within a running kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shoal/dev/coll/detail/reduce_math.cuh"

namespace shoal::detail {

template <typename T>
__device__ inline T load_cg(const T* p) {
  if constexpr (sizeof(T) == 16) {
    uint4 v = __ldcg(reinterpret_cast<const uint4*>(p));
    T out;
    memcpy(&out, &v, 16);
    return out;
  } else if constexpr (sizeof(T) == 8) {
    unsigned long long v = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    T out;
    memcpy(&out, &v, 8);
    return out;
  } else if constexpr (sizeof(T) == 4) {
    unsigned v = __ldcg(reinterpret_cast<const unsigned*>(p));
    T out;
    memcpy(&out, &v, 4);
    return out;
  } else if constexpr (sizeof(T) == 2) {
    unsigned short v = __ldcg(reinterpret_cast<const unsigned short*>(p));
    T out;
    memcpy(&out, &v, 2);
    return out;
  } else {
    unsigned char v = __ldcg(reinterpret_cast<const unsigned char*>(p));
    T out;
    memcpy(&out, &v, 1);
    return out;
  }
}

__device__ inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// For k in [0, count): every destination d < n_dst gets op over s < n_src of source(s)[k].
// source(s) and destination(d) return element pointers; the unit's threads share the work.
template <reduce_op Op, typename T, typename Source, typename Dest>
__device__ inline void reduce_sources(std::size_t count, int n_src, Source source, int n_dst, Dest destination,
                                      unsigned rank, unsigned threads) {
  bool vectors = true;
  for (int s = 0; s < n_src; ++s) vectors &= aligned16(source(s));
  for (int d = 0; d < n_dst; ++d) vectors &= aligned16(destination(d));
  std::size_t done = 0;
  if (vectors) {
    using word = uint4;
    constexpr int kPer = 16 / sizeof(T);
    constexpr int kUnroll = 4;
    const std::size_t words = count / kPer;
    std::size_t i = rank;
    for (; i + (kUnroll - 1) * std::size_t(threads) < words; i += kUnroll * std::size_t(threads)) {
      acc_word<T, word> acc[kUnroll];
      const word* first = reinterpret_cast<const word*>(source(0));
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc[u] = acc_word<T, word>::from(load_cg(first + i + u * threads));
      for (int s = 1; s < n_src; ++s) {
        const word* from = reinterpret_cast<const word*>(source(s));
        word w[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) w[u] = load_cg(from + i + u * threads);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc[u].template add<Op>(w[u]);
      }
      for (int d = 0; d < n_dst; ++d) {
        word* to = reinterpret_cast<word*>(destination(d));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) to[i + u * threads] = acc[u].word();
      }
    }
    for (; i < words; i += threads) {
      auto acc = acc_word<T, word>::from(load_cg(reinterpret_cast<const word*>(source(0)) + i));
      for (int s = 1; s < n_src; ++s) acc.template add<Op>(load_cg(reinterpret_cast<const word*>(source(s)) + i));
      for (int d = 0; d < n_dst; ++d) reinterpret_cast<word*>(destination(d))[i] = acc.word();
    }
    done = words * kPer;
  }
  for (std::size_t k = done + rank; k < count; k += threads) {
    acc_t<T> acc = to_acc(load_cg(source(0) + k));
    for (int s = 1; s < n_src; ++s) acc = combine<Op>(acc, to_acc(load_cg(source(s) + k)));
    for (int d = 0; d < n_dst; ++d) destination(d)[k] = from_acc<T>(acc);
  }
}

}  // namespace shoal::detail
