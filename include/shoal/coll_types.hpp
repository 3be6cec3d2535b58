// Vocabulary of the collectives, shared by the host and device APIs: reduction operators (a runtime
// enum for the host API, tag objects for kernels) and which element types each operator accepts.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace shoal {

enum class reduce_op { sum, prod, min, max, bit_and, bit_or, bit_xor };
inline constexpr int kReduceOpCount = 7;

constexpr std::string_view to_string(reduce_op op) {
  constexpr std::string_view kNames[] = {"sum", "prod", "min", "max", "bit_and", "bit_or", "bit_xor"};
  return kNames[static_cast<int>(op)];
}

// Device calls take the operator as a tag so each one compiles to its own loop:
//   shoal::reduce(shoal::grid, team, shoal::op::sum, dst, src, count)
template <reduce_op Op>
struct op_tag {
  static constexpr reduce_op value = Op;
};
namespace op {
inline constexpr op_tag<reduce_op::sum> sum{};
inline constexpr op_tag<reduce_op::prod> prod{};
inline constexpr op_tag<reduce_op::min> min{};
inline constexpr op_tag<reduce_op::max> max{};
inline constexpr op_tag<reduce_op::bit_and> bit_and{};
inline constexpr op_tag<reduce_op::bit_or> bit_or{};
inline constexpr op_tag<reduce_op::bit_xor> bit_xor{};
}  // namespace op

// The algorithms a device collective compiles. By default a call holds every algorithm and the cost model
// picks one per call (SHOAL_ALGO_<COLLECTIVE> and team_handle::with_algorithm can force it). A kernel that
// only ever makes small calls can pass shoal::ll_only as the last argument:
//   shoal::reduce(shoal::grid, team, shoal::op::sum, dst, src, count, shoal::ll_only)
// The call then runs LL (flags in the data) at every size and compiles nothing else, which keeps the kernel
// small: inside a kernel that holds the other algorithms an LL call takes 0.1–0.3 µs longer at 4 KiB
// (0.3–0.5 before perf notes 56; notes 42, 43, 50 and 56). LL sends twice the bytes, so it is the fastest
// choice up to a few hundred KiB and correct but slower beyond. Forcing does not apply to these calls. LL
// reaches the members by load and store only: on a team that spans nodes the call reports that and traps,
// in every build.
struct ll_only_t {
  explicit constexpr ll_only_t() = default;
};
inline constexpr ll_only_t ll_only{};

// The element types of the collectives: 8- to 64-bit integers, half, bfloat16, float, double.
// The standard signed and unsigned integer types and char (not bool, wchar_t or the charN_t types).
template <typename T>
inline constexpr bool is_reduce_integer_v = std::is_integral_v<T> && sizeof(T) <= 8 && !std::is_same_v<T, bool> &&
                                            !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> &&
                                            !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t>;
template <typename T>
inline constexpr bool is_reduce_floating_v = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                             std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool is_reduce_type_v = is_reduce_integer_v<T> || is_reduce_floating_v<T>;

// Bit operators are defined on integers only.
constexpr bool is_bit_op(reduce_op op) {
  return op == reduce_op::bit_and || op == reduce_op::bit_or || op == reduce_op::bit_xor;
}
template <typename T>
constexpr bool op_defined_for(reduce_op op) {
  return is_reduce_type_v<T> && (is_reduce_integer_v<T> || !is_bit_op(op));
}
template <typename T, reduce_op Op>
inline constexpr bool op_defined_for_v = is_reduce_type_v<T> && (is_reduce_integer_v<T> || !(Op == reduce_op::bit_and ||
                                                                                             Op == reduce_op::bit_or ||
                                                                                             Op == reduce_op::bit_xor));

}  // namespace shoal
