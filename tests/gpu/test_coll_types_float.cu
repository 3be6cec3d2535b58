// Device-API reduce and reducescatter on half, bfloat16, float and double at grid scope (4 CTAs; every
// algorithm forced in turn, 1, 37 and 10000 elements, misaligned and in place). With two PEs the results
// are exact: half and bfloat16 accumulate in float and round once, as the host reference does; with more
// PEs the order of the sum differs and a tolerance applies. Few instantiations: each costs seconds.
#include "coll_reference.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

template <reduce_op Op, typename T>
__global__ void typed_reduce_kernel(team_handle t, bool scatter, T* dst, const T* src, std::size_t count) {
  if (scatter)
    reducescatter(grid, t, op_tag<Op>{}, dst, src, count);
  else
    reduce(grid, t, op_tag<Op>{}, dst, src, count);
}

template <reduce_op Op, typename T>
void check_typed(std::uint64_t seed) {
  const matrix_options m{.kinds = {coll_kind::reduce, coll_kind::reducescatter}, .counts = {1, 37, 10000}, .op = Op};
  run_matrix<T>(world_team(*the_world()), m, seed,
                [](const team_handle& h, coll_kind kind, T* dst, const T* src, std::size_t count, int) {
                  const launch_shape s = shape_of(scope_kind::grid);
                  typed_reduce_kernel<Op, T>
                      <<<s.blocks, s.threads>>>(h, kind == coll_kind::reducescatter, dst, src, count);
                  wait_for_kernel(to_string(kind));
                });
}

TEST(CollDeviceTypes, HalfSum) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::sum, __half>(31);
}
TEST(CollDeviceTypes, Bfloat16Sum) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::sum, __nv_bfloat16>(32);
}
TEST(CollDeviceTypes, Bfloat16Max) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::max, __nv_bfloat16>(33);
}
TEST(CollDeviceTypes, FloatProd) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::prod, float>(34);
}
TEST(CollDeviceTypes, DoubleMin) {
  SHOAL_REQUIRE_WORLD(1);
  check_typed<reduce_op::min, double>(35);
}

}  // namespace
}  // namespace shoal::gpu_test
