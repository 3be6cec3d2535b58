// Device-API reduce and reducescatter on integer element types with several operators, at block scope
// (every algorithm forced in turn, 1, 37 and 10000 elements, misaligned and in place). The on-stream
// tests cover every type x operator; these check that the device templates compile and run for the
// integer widths, signedness and the bit operators. Kept to a few instantiations: each costs seconds.
#include "coll_reference.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

// One kernel per collective: a kernel holding both compiles slower than the two apart.
template <reduce_op Op, typename T, bool kScatter>
__global__ void typed_reduce_kernel(team_handle t, T* dst, const T* src, std::size_t count) {
  if constexpr (kScatter)
    reducescatter(block, t, op_tag<Op>{}, dst, src, count);
  else
    reduce(block, t, op_tag<Op>{}, dst, src, count);
}

template <reduce_op Op, typename T>
void check_typed(std::uint64_t seed) {
  const matrix_options m{.kinds = {coll_kind::reduce, coll_kind::reducescatter}, .counts = {1, 37, 10000}, .op = Op};
  run_matrix<T>(world_team(*the_world()), m, seed,
                [](const team_handle& h, coll_kind kind, T* dst, const T* src, std::size_t count, int) {
                  if (kind == coll_kind::reducescatter)
                    typed_reduce_kernel<Op, T, true><<<1, 256>>>(h, dst, src, count);
                  else
                    typed_reduce_kernel<Op, T, false><<<1, 256>>>(h, dst, src, count);
                  wait_for_kernel(to_string(kind));
                });
}

TEST(CollDeviceTypes, Int8Sum) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::sum, std::int8_t>(21);
}
TEST(CollDeviceTypes, Int8Min) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::min, std::int8_t>(22);
}
TEST(CollDeviceTypes, Int16Prod) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::prod, std::int16_t>(23);
}
TEST(CollDeviceTypes, Uint16Max) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::max, std::uint16_t>(24);
}
TEST(CollDeviceTypes, Uint32BitXor) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::bit_xor, std::uint32_t>(25);
}
TEST(CollDeviceTypes, Int64BitAnd) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::bit_and, std::int64_t>(26);
}
TEST(CollDeviceTypes, Uint64Sum) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::sum, std::uint64_t>(27);
}

}  // namespace
}  // namespace shoal::gpu_test
