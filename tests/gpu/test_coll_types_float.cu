// Device-API reduce and reducescatter on half, bfloat16, float and double at grid scope (4 CTAs; every
// algorithm forced in turn, 1, 37 and 10000 elements, misaligned and in place). With two PEs the results
// are exact: half and bfloat16 accumulate in float and round once, as the host reference does; with more
// PEs the order of the sum differs and a tolerance applies. Few instantiations: each costs seconds.
#include <bit>
#include <limits>

#include "coll_reference.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

// One kernel per collective: a kernel holding both compiles slower than the two apart.
template <reduce_op Op, typename T, bool kScatter>
__global__ void typed_reduce_kernel(team_handle t, T* dst, const T* src, std::size_t count) {
  if constexpr (kScatter)
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
                  if (kind == coll_kind::reducescatter)
                    typed_reduce_kernel<Op, T, true><<<s.blocks, s.threads>>>(h, dst, src, count);
                  else
                    typed_reduce_kernel<Op, T, false><<<s.blocks, s.threads>>>(h, dst, src, count);
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

// ---- min and max where the order of the operands could show: NaN and signed zeros

// Element k of PE pe's input: a NaN on one side or the other, zeros of either sign, or a finite value.
float nan_zero_input(int pe, std::size_t k) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const bool even = pe % 2 == 0;
  switch (k % 6) {
    case 0: return even ? nan : 1.0f;
    case 1: return even ? 1.0f : nan;
    case 2: return even ? 0.0f : -0.0f;
    case 3: return even ? -0.0f : 0.0f;
    case 4: return -0.0f;
    default: return float(pe) * 0.25f - float(k % 7);
  }
}

// Each member combines its own input first, so an order-dependent min or max (max(NaN, 1) = NaN but
// max(1, NaN) = 1) gives members different results, and members that branch on them part ways. Every
// member must get the same bits, and a NaN or a +0 (max) / -0 (min) where any input had one.
template <reduce_op Op>
void check_nan_and_signed_zeros() {
  world& w = *the_world();
  const team& t = world_team(w);
  const int n = t.size();
  constexpr std::size_t kCount = 6000;
  auto* src = static_cast<float*>(w.malloc(kCount * sizeof(float)));
  auto* dst = static_cast<float*>(w.malloc(kCount * sizeof(float)));
  std::vector<float> mine(kCount), want(kCount);
  for (std::size_t k = 0; k < kCount; ++k) {
    mine[k] = nan_zero_input(w.pe(), k);
    want[k] = nan_zero_input(t.pe_of(0), k);
    for (int m = 1; m < n; ++m) want[k] = host_combine(Op, want[k], nan_zero_input(t.pe_of(m), k));
  }
  CUDA_OK(cudaMemcpy(src, mine.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
  for (const algorithm algo : {algorithm::ll, algorithm::one_shot, algorithm::two_shot}) {
    SCOPED_TRACE(std::string(Op == reduce_op::max ? "max" : "min") + " by " + std::string(to_string(algo)));
    barrier_all(w);
    const launch_shape s = shape_of(scope_kind::grid);
    typed_reduce_kernel<Op, float, false>
        <<<s.blocks, s.threads>>>(t.device_handle().with_algorithm(collective::reduce, algo), dst, src, kCount);
    wait_for_kernel("min/max with NaN and signed zeros");
    std::vector<float> got(kCount);
    CUDA_OK(cudaMemcpy(got.data(), dst, kCount * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<float> all(kCount * std::size_t(w.n_pes()));
    w.bootstrap().all_gather(got.data(), all.data(), kCount * sizeof(float));
    for (std::size_t k = 0; k < kCount; ++k) {
      if (std::isnan(want[k]))
        ASSERT_TRUE(std::isnan(got[k])) << "element " << k << ": " << got[k];
      else
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[k]), std::bit_cast<std::uint32_t>(want[k]))
            << "element " << k << ": " << got[k] << ", want " << want[k];
      for (int pe = 0; pe < w.n_pes(); ++pe)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(all[std::size_t(pe) * kCount + k]), std::bit_cast<std::uint32_t>(got[k]))
            << "element " << k << " differs between PE " << pe << " and PE " << w.pe();
    }
  }
  barrier_all(w);
  w.free(dst);
  w.free(src);
}

TEST(CollDeviceTypes, FloatMinMaxAgreeOnNaNAndSignedZeros) {
  SHOAL_REQUIRE_WORLD(1);
  check_nan_and_signed_zeros<reduce_op::max>();
  check_nan_and_signed_zeros<reduce_op::min>();
}

}  // namespace
}  // namespace shoal::gpu_test
