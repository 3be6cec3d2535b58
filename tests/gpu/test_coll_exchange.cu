// Device-API broadcast, fcollect and alltoall at thread, warp, block and grid scope (every algorithm
// forced in turn and the model's choice; sizes from 0 up; aligned, misaligned and in-place broadcast;
// the root moving between members), on int32_t elements and on single bytes (odd lengths and addresses). Also the team
// barrier and sync at every scope: what a member wrote before the barrier is visible to every member after it.
#include "coll_reference.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {

namespace {

// One kernel per collective and scope, on bytes: the typed forms only scale the count (count * sizeof(T)),
// and each instantiation of the exchange templates costs seconds of compile time. A kernel holding all
// three collectives compiled 40% slower than the three apart (ptxas, with spills) and is not what a user
// writes. With kLLOnly every call passes shoal::ll_only (test_coll_ll_only.cu).
template <coll_kind kKind, typename Scope, bool kLLOnly>
__global__ void exchange_kernel(team_handle t, std::uint8_t* dst, const std::uint8_t* src, std::size_t count,
                                int root) {
  with_ll_only<kLLOnly>([&](auto... algorithms) {
    if constexpr (kKind == coll_kind::broadcast)
      broadcast(Scope{}, t, dst, src, count, root, algorithms...);
    else if constexpr (kKind == coll_kind::fcollect)
      fcollect(Scope{}, t, dst, src, count, algorithms...);
    else if constexpr (kKind == coll_kind::alltoall)
      alltoall(Scope{}, t, dst, src, count, algorithms...);
  });
}

}  // namespace

template <typename T>
void device_exchange(scope_kind scope, const team_handle& t, coll_kind kind, T* dst, const T* src, std::size_t count,
                     int root, bool ll_only) {
  const launch_shape s = shape_of(scope);
  auto* d = reinterpret_cast<std::uint8_t*>(dst);
  auto* from = reinterpret_cast<const std::uint8_t*>(src);
  const std::size_t bytes = count * sizeof(T);
  with_scope(scope, ll_only, [&]<typename Scope, bool kLLOnly>() {
    switch (kind) {
      case coll_kind::broadcast:
        exchange_kernel<coll_kind::broadcast, Scope, kLLOnly><<<s.blocks, s.threads>>>(t, d, from, bytes, root);
        break;
      case coll_kind::fcollect:
        exchange_kernel<coll_kind::fcollect, Scope, kLLOnly><<<s.blocks, s.threads>>>(t, d, from, bytes, root);
        break;
      case coll_kind::alltoall:
        exchange_kernel<coll_kind::alltoall, Scope, kLLOnly><<<s.blocks, s.threads>>>(t, d, from, bytes, root);
        break;
      default:
        throw std::logic_error(std::string("device_exchange: not an exchange: ") + to_string(kind));
    }
  });
  wait_for_kernel(to_string(kind));
}

template void device_exchange<std::int32_t>(scope_kind, const team_handle&, coll_kind, std::int32_t*,
                                            const std::int32_t*, std::size_t, int, bool);
template void device_exchange<std::uint8_t>(scope_kind, const team_handle&, coll_kind, std::uint8_t*,
                                            const std::uint8_t*, std::size_t, int, bool);

namespace {

const std::vector<coll_kind> kExchanges = {coll_kind::broadcast, coll_kind::fcollect, coll_kind::alltoall};

template <typename T>
void exchange_matrix(scope_kind scope, std::vector<std::size_t> counts, std::uint64_t seed) {
  const matrix_options m{.kinds = kExchanges, .counts = std::move(counts)};
  SCOPED_TRACE(std::string("scope ") + to_string(scope) + ", element bytes " + std::to_string(sizeof(T)));
  run_matrix<T>(world_team(*the_world()), m, seed, device_api_at<T>(scope));
}

TEST(CollExchange, ThreadScope) {
  SHOAL_REQUIRE_WORLD(1);
  exchange_matrix<std::int32_t>(scope_kind::thread, {0, 1, 37, 1000}, 11);
}
TEST(CollExchange, WarpScope) {
  SHOAL_REQUIRE_WORLD(1);
  exchange_matrix<std::int32_t>(scope_kind::warp, {0, 1, 37, 1000, 10000}, 12);
}
TEST(CollExchange, BlockScope) {
  SHOAL_REQUIRE_WORLD(1);
  exchange_matrix<std::int32_t>(scope_kind::block, {0, 1, 37, 1000, 10000, 65537}, 13);
}
TEST(CollExchange, GridScope) {
  SHOAL_REQUIRE_WORLD(1);
  exchange_matrix<std::int32_t>(scope_kind::grid, {0, 1, 37, 1000, 10000, 65537}, 14);
}
// Single bytes: odd byte counts and addresses 1 byte off, below the 8-byte words of LL lines.
TEST(CollExchange, BytesThreadScope) {
  SHOAL_REQUIRE_WORLD(1);
  exchange_matrix<std::uint8_t>(scope_kind::thread, {1, 7, 37, 1001}, 15);
}
TEST(CollExchange, BytesWarpScope) {
  SHOAL_REQUIRE_WORLD(1);
  exchange_matrix<std::uint8_t>(scope_kind::warp, {1, 7, 37, 1001, 40003}, 16);
}
TEST(CollExchange, BytesBlockScope) {
  SHOAL_REQUIRE_WORLD(1);
  exchange_matrix<std::uint8_t>(scope_kind::block, {1, 7, 37, 1001, 40003, 100003}, 18);
}
TEST(CollExchange, BytesGridScope) {
  SHOAL_REQUIRE_WORLD(1);
  exchange_matrix<std::uint8_t>(scope_kind::grid, {1, 7, 37, 1001, 40003, 100003}, 17);
}

// ---- team barrier and sync

constexpr int kBarrierRounds = 50;

// Each round the scope's last thread (at grid scope the last CTA's: not the thread that announces the
// arrival, so the barrier's one fence must cover other threads' writes) writes the round into its slot on
// every member, then the team meets: barrier must complete those writes itself; before sync the writer
// completes them with quiet. After the meeting every member's slot must hold this round. Two rows
// alternate so a fast member cannot overwrite a value a slow one still checks.
template <typename Scope>
__global__ void team_meet_rounds(team_handle t, bool use_sync, int* slots, int* errors) {
  constexpr bool kGrid = std::is_same_v<Scope, grid_scope>;
  const bool writer =
      kGrid ? blockIdx.x == gridDim.x - 1 && threadIdx.x == blockDim.x - 1 : Scope::rank() == Scope::size() - 1;
  const int n = team_n_pes(t), me = team_my_pe(t);
  for (int r = 1; r <= kBarrierRounds; ++r) {
    if (writer) {
      for (int i = 0; i < n; ++i) p(t.world, slots + (r % 2) * n + me, r, team_pe(t, i));
      if (use_sync) quiet(t.world);
    }
    if (use_sync)
      sync(Scope{}, t);
    else
      barrier(Scope{}, t);
    if (writer)
      for (int i = 0; i < n; ++i)
        if (reinterpret_cast<volatile int*>(slots)[(r % 2) * n + i] != r) atomicAdd(errors, 1);
    if (use_sync)
      sync(Scope{}, t);
    else
      barrier(Scope{}, t);
  }
}

template <typename Scope>
void check_team_meet(const team& t, scope_kind scope) {
  world& w = t.owner();
  // Sized for the world: every PE allocates the same, whatever team it is in.
  int* slots = static_cast<int*>(w.calloc(2 * std::size_t(w.n_pes()), sizeof(int)));
  int* errors = nullptr;
  ASSERT_EQ(cudaMalloc(&errors, sizeof(int)), cudaSuccess);
  for (bool use_sync : {false, true}) {
    SCOPED_TRACE(std::string(use_sync ? "sync" : "barrier") + " at " + to_string(scope) + " scope");
    ASSERT_EQ(cudaMemset(errors, 0, sizeof(int)), cudaSuccess);
    if (t.member()) {
      const launch_shape s = shape_of(scope);
      team_meet_rounds<Scope><<<s.blocks, s.threads>>>(t.device_handle(), use_sync, slots, errors);
      wait_for_kernel("team barrier rounds");
      int got = -1;
      ASSERT_EQ(cudaMemcpy(&got, errors, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(got, 0) << "slots that did not hold the round after the team met";
    }
    barrier_all(w);
  }
  cudaFree(errors);
  w.free(slots);
}

TEST(CollBarrier, ThreadScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_team_meet<thread_scope>(world_team(*the_world()), scope_kind::thread);
}
TEST(CollBarrier, WarpScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_team_meet<warp_scope>(world_team(*the_world()), scope_kind::warp);
}
TEST(CollBarrier, BlockScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_team_meet<block_scope>(world_team(*the_world()), scope_kind::block);
}
TEST(CollBarrier, GridScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_team_meet<grid_scope>(world_team(*the_world()), scope_kind::grid);
}
// Teams that are not the world: each PE alone (on one node), and the even-numbered PEs.
TEST(CollBarrier, SplitTeamsBlockScope) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  check_team_meet<block_scope>(same_local_rank_team(w), scope_kind::block);
  team evens = split_strided(w, world_team(w), 0, 2, (w.n_pes() + 1) / 2);
  check_team_meet<block_scope>(evens, scope_kind::block);
  check_team_meet<grid_scope>(evens, scope_kind::grid);
}

}  // namespace
}  // namespace shoal::gpu_test
