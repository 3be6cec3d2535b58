// Device collectives called with shoal::ll_only (LL alone, whatever the size) at thread, warp, block and
// grid scope, through the launchers of test_coll_reduce.cu and test_coll_exchange.cu: reduce and
// reducescatter on int32_t with sum, broadcast, fcollect and alltoall on bytes; sizes from 0 to several LL
// steps per unit, aligned, misaligned and in place, against the host reference.
// A kernel that mixes ll_only calls with the model's calls on one team, back to back, checks they share
// the channels' steps.
#include "coll_reference.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {

namespace {

template <typename T>
void ll_only_matrix(std::vector<coll_kind> kinds, scope_kind scope, std::vector<std::size_t> counts,
                    std::uint64_t seed) {
  // Forcing does not apply to ll_only calls: one pass, with the handle as the team gives it.
  const matrix_options m{.kinds = std::move(kinds), .counts = std::move(counts), .algorithms = {std::nullopt}};
  SCOPED_TRACE(std::string("ll_only at scope ") + to_string(scope));
  run_matrix<T>(world_team(*the_world()), m, seed, device_api_at<T>(scope, /*ll_only=*/true));
}

const std::vector<coll_kind> kReductions = {coll_kind::reduce, coll_kind::reducescatter};
const std::vector<coll_kind> kExchanges = {coll_kind::broadcast, coll_kind::fcollect, coll_kind::alltoall};

// 65537 int32_t at block scope is 256 KiB in one unit: many LL steps on one channel.
TEST(CollLLOnly, Reductions) {
  SHOAL_REQUIRE_WORLD(1);
  SHOAL_REQUIRE_ONE_NODE();
  ll_only_matrix<std::int32_t>(kReductions, scope_kind::thread, {0, 1, 37, 1000}, 21);
  ll_only_matrix<std::int32_t>(kReductions, scope_kind::warp, {0, 1, 37, 1000, 10000}, 22);
  ll_only_matrix<std::int32_t>(kReductions, scope_kind::block, {0, 1, 37, 1000, 65537}, 23);
  ll_only_matrix<std::int32_t>(kReductions, scope_kind::grid, {0, 1, 37, 1000, 65537}, 24);
}
TEST(CollLLOnly, ExchangesOnBytes) {
  SHOAL_REQUIRE_WORLD(1);
  SHOAL_REQUIRE_ONE_NODE();
  ll_only_matrix<std::uint8_t>(kExchanges, scope_kind::thread, {0, 1, 7, 1001}, 25);
  ll_only_matrix<std::uint8_t>(kExchanges, scope_kind::warp, {1, 7, 37, 40003}, 26);
  ll_only_matrix<std::uint8_t>(kExchanges, scope_kind::block, {1, 37, 1001, 100003}, 27);
  ll_only_matrix<std::uint8_t>(kExchanges, scope_kind::grid, {0, 1, 37, 1001, 262147}, 28);
}

// ---- ll_only and the model's calls back to back on one team

// Each round: an ll_only all-reduce of `small` elements, then a model-picked one of `large` (another
// algorithm at that size), each into its own dst, with no barrier between rounds.
__global__ void mixed_kernel(team_handle t, int rounds, std::int32_t* small_dst, const std::int32_t* small_src,
                             std::size_t small, std::int32_t* large_dst, const std::int32_t* large_src,
                             std::size_t large) {
  for (int r = 0; r < rounds; ++r) {
    reduce(grid, t, op::sum, small_dst + r * small, small_src + r * small, small, ll_only);
    reduce(grid, t, op::sum, large_dst + r * large, large_src + r * large, large);
  }
}

TEST(CollLLOnly, MixedWithTheModelsCalls) {
  SHOAL_REQUIRE_WORLD(2);  // on one PE the model picks LL at every size
  SHOAL_REQUIRE_ONE_NODE();
  world& w = *the_world();
  const team& t = world_team(w);
  constexpr int kRounds = 8;
  constexpr std::size_t kSmall = 1000, kLarge = 1 << 18;  // 4 KiB (LL) and 1 MiB (the model's larger pick)
  const team_handle h = t.device_handle();
  ASSERT_NE(h.pick(collective::reduce, kLarge * sizeof(std::int32_t), algorithm::two_shot), algorithm::ll);
  const std::size_t small_all = kRounds * kSmall, large_all = kRounds * kLarge;
  auto* small_src = static_cast<std::int32_t*>(w.malloc(small_all * sizeof(std::int32_t)));
  auto* small_dst = static_cast<std::int32_t*>(w.malloc(small_all * sizeof(std::int32_t)));
  auto* large_src = static_cast<std::int32_t*>(w.malloc(large_all * sizeof(std::int32_t)));
  auto* large_dst = static_cast<std::int32_t*>(w.malloc(large_all * sizeof(std::int32_t)));
  auto input_of = [](int pe, std::size_t n, std::uint64_t salt) {
    return random_values<std::int32_t>(salt * 1024 + std::uint64_t(pe), n, reduce_op::sum);
  };
  auto upload = [](std::int32_t* to, const std::vector<std::int32_t>& v) {
    ASSERT_EQ(cudaMemcpy(to, v.data(), v.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice), cudaSuccess);
  };
  upload(small_src, input_of(w.pe(), small_all, 31));
  upload(large_src, input_of(w.pe(), large_all, 32));
  barrier_all(w);
  mixed_kernel<<<4, 128>>>(h, kRounds, small_dst, small_src, kSmall, large_dst, large_src, kLarge);
  wait_for_kernel("mixed ll_only and model all-reduces");
  auto expect_sums = [&](const std::int32_t* dst, std::size_t n, std::uint64_t salt, const char* what) {
    std::vector<std::int32_t> got(n), want(n, 0);
    ASSERT_EQ(cudaMemcpy(got.data(), dst, n * sizeof(std::int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int pe = 0; pe < w.n_pes(); ++pe) {
      const std::vector<std::int32_t> in = input_of(pe, n, salt);
      for (std::size_t k = 0; k < n; ++k)
        want[k] = std::int32_t(std::uint32_t(want[k]) + std::uint32_t(in[k]));  // wraps like the device's sum
    }
    std::size_t bad = 0;
    for (std::size_t k = 0; k < n; ++k) bad += got[k] != want[k];
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << n << " elements wrong";
  };
  expect_sums(small_dst, small_all, 31, "ll_only calls");
  expect_sums(large_dst, large_all, 32, "model calls");
  barrier_all(w);
  w.free(large_dst);
  w.free(large_src);
  w.free(small_dst);
  w.free(small_src);
}

}  // namespace
}  // namespace shoal::gpu_test
