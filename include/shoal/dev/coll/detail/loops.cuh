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

// How reduce_sources loads its sources. The first use of a source's words waits for them, so loads issued
// after it add one memory latency per source to every pass; in pairs, the loads of two sources are all in
// flight before either is used. That takes 16 more registers per thread, which the on-stream kernels have
// (512 threads, 128 registers, one family of algorithms each). Kernels that users launch hold every
// algorithm at up to 1024 threads; there the registers spill and every call slowed, LL calls by up to
// 0.8 µs (perf notes 46), so they load one source at a time.
//
// Pipelined (a unit of one CTA moving a whole buffer: block scope): with two sources (and one or two
// destinations: a team of two), the loads of the thread's next pass go out before this pass's results are
// stored, so the loads' latency passes under the stores' drain instead of after it. Two words per source
// per thread (24 registers in flight), which a 1024-thread CTA has. Other source counts load one at a time.
enum class source_loads { one_at_a_time, in_pairs, pipelined };

// The pipelined passes over two sources into one or two destinations (a team of two; see source_loads):
// returns the index of the thread's first word left for the one-word tail. The destinations are translated
// once, before the loop, so that nothing but the words stays live across a pass.
template <reduce_op Op, typename T, typename Word>
__device__ inline std::size_t reduce_two_pipelined(std::size_t words, const Word* a, const Word* b, Word* to0,
                                                   Word* to1, unsigned rank, unsigned threads) {
  // Two words per source: u = 0 at i, u = 1 at i + threads. Plain variables, not arrays a lambda fills:
  // those went to local memory, whose stores waited for the loads and undid the pipelining.
  const std::size_t pass = 2 * std::size_t(threads);
  std::size_t i = rank;
  Word a0{}, a1{}, b0{}, b1{};
  if (i + threads < words) {
    a0 = load_cg(a + i), b0 = load_cg(b + i);
    a1 = load_cg(a + i + threads), b1 = load_cg(b + i + threads);
  }
  for (; i + threads < words; i += pass) {
    auto acc0 = acc_word<T, Word>::from(a0);
    acc0.template add<Op>(b0);
    auto acc1 = acc_word<T, Word>::from(a1);
    acc1.template add<Op>(b1);
    const Word out0 = acc0.word(), out1 = acc1.word();
    const std::size_t next = i + pass;
    if (next + threads < words) {  // the next pass's loads, ahead of this pass's stores
      a0 = load_cg(a + next), b0 = load_cg(b + next);
      a1 = load_cg(a + next + threads), b1 = load_cg(b + next + threads);
    }
    to0[i] = out0;
    to0[i + threads] = out1;
    if (to1 != nullptr) {
      to1[i] = out0;
      to1[i + threads] = out1;
    }
  }
  return i;
}

// For k in [0, count): every destination d < n_dst gets op over s < n_src of source(s)[k].
// source(s) and destination(d) return element pointers; the unit's threads share the work.
template <reduce_op Op, typename T, source_loads kLoads = source_loads::one_at_a_time, typename Source, typename Dest>
__device__ inline void reduce_sources(std::size_t count, int n_src, Source source, int n_dst, Dest destination,
                                      unsigned rank, unsigned threads) {
  constexpr bool kPairs = kLoads == source_loads::in_pairs;
  constexpr int kGroup = kPairs ? 2 : 1;  // sources loaded together
  bool vectors = true;
  for (int s = 0; s < n_src; ++s) vectors &= aligned16(source(s));
  for (int d = 0; d < n_dst; ++d) vectors &= aligned16(destination(d));
  std::size_t done = 0;
  if (vectors) {
    using word = uint4;
    constexpr int kPer = 16 / sizeof(T);
    constexpr int kUnroll = 4;
    const std::size_t words = count / kPer;
    auto from = [&](int s) { return reinterpret_cast<const word*>(source(s)); };
    // Loads words u of source s into w and, in pairs, of source s + 1 (if there is one) into x.
    auto load_group = [&](int s, std::size_t i, word(&w)[kUnroll], word(&x)[kUnroll]) {
      const word* first = from(s);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) w[u] = load_cg(first + i + u * threads);
      if (kPairs && s + 1 < n_src) {
        const word* second = from(s + 1);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) x[u] = load_cg(second + i + u * threads);
      }
    };
    std::size_t i = rank;
    if constexpr (kLoads == source_loads::pipelined) {
      if (n_src == 2 && n_dst <= 2) {
        word* to1 = n_dst == 2 ? reinterpret_cast<word*>(destination(1)) : nullptr;
        i = reduce_two_pipelined<Op, T>(words, from(0), from(1), reinterpret_cast<word*>(destination(0)), to1, rank,
                                        threads);
      }
    }
    for (; i + (kUnroll - 1) * std::size_t(threads) < words; i += kUnroll * std::size_t(threads)) {
      acc_word<T, word> acc[kUnroll];
      word w[kUnroll], x[kUnroll];
      load_group(0, i, w, x);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc[u] = acc_word<T, word>::from(w[u]);
      if (kPairs && n_src > 1) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc[u].template add<Op>(x[u]);
      }
      for (int s = kGroup; s < n_src; s += kGroup) {
        load_group(s, i, w, x);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc[u].template add<Op>(w[u]);
        if (kPairs && s + 1 < n_src) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) acc[u].template add<Op>(x[u]);
        }
      }
      for (int d = 0; d < n_dst; ++d) {
        word* to = reinterpret_cast<word*>(destination(d));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) to[i + u * threads] = acc[u].word();
      }
    }
    // One word per thread: only the first two sources go in a pair (a team of two, the common case).
    for (; i < words; i += threads) {
      const word first = load_cg(from(0) + i);
      const word second = kPairs && n_src > 1 ? load_cg(from(1) + i) : word{};
      auto acc = acc_word<T, word>::from(first);
      if (kPairs && n_src > 1) acc.template add<Op>(second);
      for (int s = kGroup; s < n_src; ++s) acc.template add<Op>(load_cg(from(s) + i));
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
