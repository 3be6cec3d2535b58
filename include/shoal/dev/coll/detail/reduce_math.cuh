// Element arithmetic of the reductions. half and bfloat16 accumulate in float (one rounding at the end);
// integer sum and prod wrap (computed unsigned, so signed overflow is defined); min and max compare as
// the element type. Values travel between PEs as raw bits in 8- or 16-byte words.
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

template <reduce_op Op, typename A>
__device__ inline A combine(A a, A b) {
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

// A word of W bytes (8 or 16) holding W / sizeof(T) elements, accumulated element by element.
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

}  // namespace shoal::detail
