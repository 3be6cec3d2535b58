// Element arithmetic of the reductions. half and bfloat16 accumulate in float (one rounding at the end);
// integer sum and prod wrap (computed unsigned, so signed overflow is defined); min and max compare as
// the element type, and on floating types follow IEEE 754-2019 minimum and maximum. Values travel
// between PEs as raw bits in 8- or 16-byte words; 8- and 16-bit integers are combined four or two to a
// 32-bit lane (acc_word below).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shoal/coll_types.hpp"

namespace shoal::detail {

template <typename T>
struct accumulate_as {
  using type = T;
};
template <>
struct accumulate_as<__half> {
  using type = float;
};
template <>
struct accumulate_as<__nv_bfloat16> {
  using type = float;
};
template <typename T>
using acc_t = typename accumulate_as<T>::type;

template <typename T>
__device__ inline acc_t<T> to_acc(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return v;
}
template <typename T>
__device__ inline T from_acc(acc_t<T> v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return v;
}

// min and max on floating types: a NaN wins (the canonical quiet NaN comes out) and -0 < +0. Every member
// combines the inputs in its own order (its own first), so the op must not depend on the order: with
// `b < a ? b : a`, max(NaN, 1) is NaN on one member and 1 on the other, and min(+0, -0) has either sign,
// and members that branch on the result part ways.
template <reduce_op Op, typename A>
__device__ inline A floating_min_max(A a, A b) {
  constexpr bool kMax = Op == reduce_op::max;
  if (a != a || b != b) {
    if constexpr (sizeof(A) == 4) return __int_as_float(0x7fffffff);
    return __longlong_as_double(0x7fffffffffffffffll);
  }
  if (a == b) return (signbit(a) != 0) == kMax ? b : a;  // equal but for the sign of a zero
  return (a < b) == kMax ? b : a;
}

template <reduce_op Op, typename A>
__device__ inline A combine(A a, A b) {
  if constexpr ((Op == reduce_op::min || Op == reduce_op::max) && std::is_floating_point_v<A>)
    return floating_min_max<Op>(a, b);
  if constexpr (Op == reduce_op::min) return b < a ? b : a;
  if constexpr (Op == reduce_op::max) return a < b ? b : a;
  if constexpr (std::is_integral_v<A>) {
    // Unsigned arithmetic of at least int's width: narrower types would promote to int and overflow.
    using U = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, std::make_unsigned_t<A>>;
    if constexpr (Op == reduce_op::sum) return A(U(a) + U(b));
    if constexpr (Op == reduce_op::prod) return A(U(a) * U(b));
    if constexpr (Op == reduce_op::bit_and) return A(a & b);
    if constexpr (Op == reduce_op::bit_or) return A(a | b);
    if constexpr (Op == reduce_op::bit_xor) return A(a ^ b);
  } else {
    static_assert(Op != reduce_op::bit_and && Op != reduce_op::bit_or && Op != reduce_op::bit_xor,
                  "bit operators are defined on integer types only");
    if constexpr (Op == reduce_op::sum) return a + b;
    if constexpr (Op == reduce_op::prod) return a * b;
  }
}

// A word of W bytes (8 or 16) holding W / sizeof(T) elements, accumulated element by element (8- and 16-bit
// integers: the packed form below).
template <typename T, typename Word>
struct acc_word {
  static constexpr int kCount = sizeof(Word) / sizeof(T);
  acc_t<T> v[kCount];

  __device__ static acc_word from(const Word& w) {
    T e[kCount];
    memcpy(e, &w, sizeof(Word));
    acc_word a;
#pragma unroll
    for (int i = 0; i < kCount; ++i) a.v[i] = to_acc(e[i]);
    return a;
  }
  template <reduce_op Op>
  __device__ void add(const Word& w) {
    T e[kCount];
    memcpy(e, &w, sizeof(Word));
#pragma unroll
    for (int i = 0; i < kCount; ++i) v[i] = combine<Op>(v[i], to_acc(e[i]));
  }
  __device__ Word word() const {
    T e[kCount];
#pragma unroll
    for (int i = 0; i < kCount; ++i) e[i] = from_acc<T>(v[i]);
    Word w;
    memcpy(&w, e, sizeof(Word));
    return w;
  }
};

// 8- and 16-bit integers: a word is held as 32-bit lanes of four or two elements, and sum, min, max and the
// bit operators combine a whole lane at once (the SIMD-within-a-word intrinsics; sum wraps per element).
// Holding each element in a register of its own took four times the registers: a kernel's 16-byte words of
// int8 spilled to local memory at 128 registers a thread (perf notes 87).
template <typename T>
inline constexpr bool kPackedInLanes = std::is_integral_v<T> && sizeof(T) < 4;

template <reduce_op Op, typename T>
__device__ inline std::uint32_t combine_lane(std::uint32_t a, std::uint32_t b) {
  constexpr bool kBytes = sizeof(T) == 1, kSigned = std::is_signed_v<T>;
  if constexpr (Op == reduce_op::bit_and) {
    return a & b;
  } else if constexpr (Op == reduce_op::bit_or) {
    return a | b;
  } else if constexpr (Op == reduce_op::bit_xor) {
    return a ^ b;
  } else if constexpr (Op == reduce_op::sum) {
    return kBytes ? __vadd4(a, b) : __vadd2(a, b);
  } else if constexpr (Op == reduce_op::min) {
    if constexpr (kSigned) return kBytes ? __vmins4(a, b) : __vmins2(a, b);
    return kBytes ? __vminu4(a, b) : __vminu2(a, b);
  } else if constexpr (Op == reduce_op::max) {
    if constexpr (kSigned) return kBytes ? __vmaxs4(a, b) : __vmaxs2(a, b);
    return kBytes ? __vmaxu4(a, b) : __vmaxu2(a, b);
  } else {  // prod: no lane-wide form; element by element
    constexpr int kCount = 4 / sizeof(T);
    T x[kCount], y[kCount];
    memcpy(x, &a, 4);
    memcpy(y, &b, 4);
#pragma unroll
    for (int i = 0; i < kCount; ++i) x[i] = combine<Op>(x[i], y[i]);
    std::uint32_t out;
    memcpy(&out, x, 4);
    return out;
  }
}

template <typename T, typename Word>
  requires kPackedInLanes<T>
struct acc_word<T, Word> {
  static constexpr int kLanes = sizeof(Word) / 4;
  std::uint32_t lane[kLanes];

  __device__ static acc_word from(const Word& w) {
    acc_word a;
    memcpy(a.lane, &w, sizeof(Word));
    return a;
  }
  template <reduce_op Op>
  __device__ void add(const Word& w) {
    std::uint32_t other[kLanes];
    memcpy(other, &w, sizeof(Word));
#pragma unroll
    for (int i = 0; i < kLanes; ++i) lane[i] = combine_lane<Op, T>(lane[i], other[i]);
  }
  __device__ Word word() const {
    Word w;
    memcpy(&w, lane, sizeof(Word));
    return w;
  }
};

}  // namespace shoal::detail
