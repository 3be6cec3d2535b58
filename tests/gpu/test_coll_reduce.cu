// Device-API reduce (all-reduce) and reducescatter at thread, warp, block and grid scope: every algorithm
// forced in turn and the model's choice, sizes 0, 1, 37, 1000, 10000 (and 65537 for block and grid), at
// aligned and misaligned (src 1, dst 2 elements off) addresses and in place, on int32_t with sum (exact for
// any number of PEs, so every misplaced element shows). Element types and operators: test_coll_types_*.cu.
#include "coll_reference.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {

namespace {

// One kernel per collective and scope (a kernel holding both compiled 20% slower). With kLLOnly every call
// passes shoal::ll_only (test_coll_ll_only.cu).
template <bool kScatter, typename Scope, bool kLLOnly>
__global__ void reduce_i32_kernel(team_handle t, std::int32_t* dst, const std::int32_t* src, std::size_t count) {
  with_ll_only<kLLOnly>([&](auto... algorithms) {
    if constexpr (kScatter)
      reducescatter(Scope{}, t, op::sum, dst, src, count, algorithms...);
    else
      reduce(Scope{}, t, op::sum, dst, src, count, algorithms...);
  });
}

}  // namespace

void device_reduce_i32(scope_kind scope, const team_handle& t, coll_kind kind, std::int32_t* dst,
                       const std::int32_t* src, std::size_t count, bool ll_only) {
  const launch_shape s = shape_of(scope);
  with_scope(scope, ll_only, [&]<typename Scope, bool kLLOnly>() {
    if (kind == coll_kind::reducescatter)
      reduce_i32_kernel<true, Scope, kLLOnly><<<s.blocks, s.threads>>>(t, dst, src, count);
    else
      reduce_i32_kernel<false, Scope, kLLOnly><<<s.blocks, s.threads>>>(t, dst, src, count);
  });
  wait_for_kernel(to_string(kind));
}

namespace {

void reduce_matrix(scope_kind scope, std::vector<std::size_t> counts, std::uint64_t seed) {
  const matrix_options m{.kinds = {coll_kind::reduce, coll_kind::reducescatter}, .counts = std::move(counts)};
  SCOPED_TRACE(std::string("scope ") + to_string(scope));
  run_matrix<std::int32_t>(world_team(*the_world()), m, seed, device_api_at<std::int32_t>(scope));
}

// Thread scope moves every element with one thread: sizes stay small.
TEST(CollReduce, ThreadScope) {
  SHOAL_REQUIRE_WORLD(1);
  reduce_matrix(scope_kind::thread, {0, 1, 37, 1000}, 1);
}
TEST(CollReduce, WarpScope) {
  SHOAL_REQUIRE_WORLD(1);
  reduce_matrix(scope_kind::warp, {0, 1, 37, 1000, 10000}, 2);
}
TEST(CollReduce, BlockScope) {
  SHOAL_REQUIRE_WORLD(1);
  reduce_matrix(scope_kind::block, {0, 1, 37, 1000, 10000, 65537}, 3);
}
TEST(CollReduce, GridScope) {
  SHOAL_REQUIRE_WORLD(1);
  reduce_matrix(scope_kind::grid, {0, 1, 37, 1000, 10000, 65537}, 4);
}

// A team of every PE but the first has one member on 2 PEs and three on 4: an odd count of sources, which
// the on-stream reductions load in pairs, the last alone (source_loads). The device API at block and grid
// scope and the on-stream forms, at sizes that reach the unrolled loops as well as the tails.
TEST(CollReduce, TeamOfEveryPeButTheFirst) {
  SHOAL_REQUIRE_WORLD(2);
  world& w = *the_world();
  team t = split_strided(w, world_team(w), 1, 1, w.n_pes() - 1);
  const matrix_options m{.kinds = {coll_kind::reduce, coll_kind::reducescatter}, .counts = {1000, 65537}};
  std::uint64_t seed = 5;
  for (scope_kind scope : {scope_kind::block, scope_kind::grid}) {
    SCOPED_TRACE(std::string("scope ") + to_string(scope));
    run_matrix<std::int32_t>(t, m, seed++, device_api_at<std::int32_t>(scope));
  }
  SCOPED_TRACE("on a stream");
  run_stream_matrix<std::int32_t>(t, m, seed);
  t.destroy();
}

}  // namespace
}  // namespace shoal::gpu_test
