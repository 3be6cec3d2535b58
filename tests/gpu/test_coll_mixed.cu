// Collectives in sequence and side by side inside one kernel:
//  - 50 rounds of reduce, reducescatter, broadcast, fcollect and alltoall on one team, back to back in
//    one kernel at block scope and at grid scope, with no team barrier between them, reusing the same
//    src and dst buffers; the algorithm changes from call to call; each result is checked in the kernel
//    against the host's reference before the next call.
//  - Several CTAs at once, each running block-scope reduces on its own channel view of the team.
#include <chrono>
#include <thread>

#include "coll_reference.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

// One call of the sequence, as the kernel reads it. The host lays out this PE's inputs and the dst
// every call must produce back to back in `inputs` and `wants`.
struct step_desc {
  int kind;  // coll_kind
  int coll;  // collective, for with_algorithm
  int algo;  // forced algorithm, or -1 for the model's choice
  int root;
  std::uint64_t count;
  std::uint64_t in_offset, in_len;      // this PE's src, in `inputs`
  std::uint64_t want_offset, want_len;  // what dst must hold, in `wants`
};

struct mismatch_log {
  unsigned long long errors;
  int claimed;
  int step;
  unsigned long long index;
  std::int32_t got, want;
};

__device__ void record(mismatch_log* log, int step, std::uint64_t index, std::int32_t got, std::int32_t want) {
  atomicAdd(&log->errors, 1ull);
  if (atomicCAS(&log->claimed, 0, 1) == 0) {
    log->step = step;
    log->index = index;
    log->got = got;
    log->want = want;
  }
}

template <typename Scope>
__global__ void mixed_sequence(team_handle t, const step_desc* steps, int n_steps, const std::int32_t* inputs,
                               const std::int32_t* wants, std::int32_t* src, std::int32_t* dst, mismatch_log* log) {
  constexpr bool kGrid = std::is_same_v<Scope, grid_scope>;
  const unsigned rank = Scope::rank(), size = Scope::size();
  // Grid scope: each CTA completes only its part, so the whole grid meets before reading dst; nothing
  // here meets the other PEs.
  auto meet_locally = [&] {
    if constexpr (kGrid)
      grid_sync(t.world);
    else
      Scope::sync();
  };
  for (int i = 0; i < n_steps; ++i) {
    const step_desc s = steps[i];
    for (std::uint64_t k = rank; k < s.in_len; k += size) src[k] = inputs[s.in_offset + k];
    meet_locally();
    const team_handle h =
        s.algo >= 0 ? t.with_algorithm(static_cast<collective>(s.coll), static_cast<algorithm>(s.algo)) : t;
    switch (static_cast<coll_kind>(s.kind)) {
      case coll_kind::reduce:
        reduce(Scope{}, h, op::sum, dst, src, s.count);
        break;
      case coll_kind::reducescatter:
        reducescatter(Scope{}, h, op::sum, dst, src, s.count);
        break;
      case coll_kind::broadcast:
        broadcast(Scope{}, h, dst, src, s.count, s.root);
        break;
      case coll_kind::fcollect:
        fcollect(Scope{}, h, dst, src, s.count);
        break;
      case coll_kind::alltoall:
        alltoall(Scope{}, h, dst, src, s.count);
        break;
    }
    meet_locally();
    const volatile std::int32_t* result = dst;  // peers wrote it: read past L1
    for (std::uint64_t k = rank; k < s.want_len; k += size)
      if (result[k] != wants[s.want_offset + k]) record(log, i, k, result[k], wants[s.want_offset + k]);
    meet_locally();  // checked before the next call refills src or lets peers write dst
  }
}

template <typename T>
T* device_copy(const std::vector<T>& v) {
  T* p = nullptr;
  if (cudaMalloc(&p, std::max<std::size_t>(1, v.size()) * sizeof(T)) != cudaSuccess)
    throw std::runtime_error("cudaMalloc failed");
  if (!v.empty() && cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
    throw std::runtime_error("cudaMemcpy failed");
  return p;
}

template <typename Scope>
void check_mixed_sequence(scope_kind scope, std::uint64_t seed) {
  world& w = *the_world();
  const team& t = world_team(w);
  const int n = t.size(), me = t.my_index();
  constexpr int kRounds = 50;

  std::vector<step_desc> steps;
  std::vector<std::int32_t> inputs, wants;
  std::size_t max_src = 1, max_dst = 1;
  for (int r = 0; r < kRounds; ++r) {
    for (coll_kind kind : kAllKinds) {
      const std::size_t i = steps.size();
      const std::size_t count = r % 9 == 8 ? 5000 + r : 1 + (i * 53) % 900;
      const std::vector<std::optional<algorithm>> algos = algorithms_of(kind);
      // Each kind comes once per round, so cycling by round gives every kind each of its algorithms (the
      // large counts of rounds 8, 17, 26 and 35 included).
      const std::optional<algorithm> algo = algos[std::size_t(r) % algos.size()];
      step_desc s{.kind = int(kind),
                  .coll = int(collective_of(kind)),
                  .algo = algo ? int(*algo) : -1,
                  .root = int(i % std::size_t(n)),
                  .count = count,
                  .in_offset = inputs.size(),
                  .in_len = src_elements(kind, count, n),
                  .want_offset = wants.size(),
                  .want_len = dst_elements(kind, count, n)};
      std::vector<std::vector<std::int32_t>> all(n);
      for (int m = 0; m < n; ++m)
        all[m] = random_values<std::int32_t>((seed * 10000 + i) * 1024 + std::uint64_t(t.pe_of(m)), s.in_len);
      inputs.insert(inputs.end(), all[me].begin(), all[me].end());
      for (const want<std::int32_t>& x : expected_dst(kind, reduce_op::sum, me, all, count, s.root))
        wants.push_back(x.value);
      max_src = std::max<std::size_t>(max_src, s.in_len);
      max_dst = std::max<std::size_t>(max_dst, s.want_len);
      steps.push_back(s);
    }
  }

  auto* src = w.malloc_array<std::int32_t>(max_src);
  auto* dst = w.malloc_array<std::int32_t>(max_dst);
  step_desc* d_steps = device_copy(steps);
  std::int32_t* d_inputs = device_copy(inputs);
  std::int32_t* d_wants = device_copy(wants);
  mismatch_log* log = device_copy(std::vector<mismatch_log>{mismatch_log{}});
  barrier_all(w);

  const launch_shape shape = shape_of(scope);
  mixed_sequence<Scope><<<shape.blocks, shape.threads>>>(t.device_handle(), d_steps, int(steps.size()), d_inputs,
                                                         d_wants, src, dst, log);
  wait_for_kernel("mixed sequence");
  mismatch_log got{};
  ASSERT_EQ(cudaMemcpy(&got, log, sizeof(got), cudaMemcpyDeviceToHost), cudaSuccess);
  if (got.errors != 0) {
    const step_desc& s = steps[got.step];
    ADD_FAILURE() << got.errors << " wrong elements over " << steps.size() << " calls; first in call " << got.step
                  << " (" << to_string(static_cast<coll_kind>(s.kind)) << ", count " << s.count << ", algorithm "
                  << (s.algo >= 0 ? std::string(shoal::to_string(static_cast<algorithm>(s.algo))) : "model")
                  << ", root " << s.root << ") at [" << got.index << "]: got " << got.got << ", want " << got.want;
  }
  cudaFree(log);
  cudaFree(d_wants);
  cudaFree(d_inputs);
  cudaFree(d_steps);
  barrier_all(w);
  w.free(dst);
  w.free(src);
}

TEST(CollMixed, BlockScopeBackToBack) {
  SHOAL_REQUIRE_WORLD(1);
  check_mixed_sequence<block_scope>(scope_kind::block, 1);
}
TEST(CollMixed, GridScopeBackToBack) {
  SHOAL_REQUIRE_WORLD(1);
  check_mixed_sequence<grid_scope>(scope_kind::grid, 2);
}

// ---- CTAs on separate channels

constexpr int kChannelCtas = 4;
constexpr int kChannelRounds = 12;

// CTA b runs kChannelRounds reduces on channel b of the team, each on its own slice: the CTAs of one PE
// run at the same time and at their own pace, and meet their peers only on their channel. The algorithm
// changes every round; the sizes differ per CTA so the CTAs drift apart.
__global__ void reduce_per_channel(team_handle t, std::int32_t* const* dsts, const std::int32_t* const* srcs,
                                   const std::size_t* counts) {
  const int b = int(blockIdx.x);
  const team_handle view = t.channels(b, 1);
  constexpr algorithm kAlgos[] = {algorithm::ll, algorithm::one_shot, algorithm::two_shot};
  for (int r = 0; r < kChannelRounds; ++r) {
    const int slot = r * kChannelCtas + b;
    reduce(block, view.with_algorithm(collective::reduce, kAlgos[(r + b) % 3]), op::sum, dsts[slot], srcs[slot],
           counts[slot]);
  }
}

TEST(CollMixed, CtasOnSeparateChannels) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const team& t = world_team(w);
  if (t.device_handle().channel_count < kChannelCtas)
    GTEST_SKIP() << "the team has fewer than " << kChannelCtas << " channels (SHOAL_TEAM_CHANNELS)";
  const int n = t.size();
  std::vector<std::size_t> counts;
  std::size_t total = 0;
  for (int r = 0; r < kChannelRounds; ++r)
    for (int b = 0; b < kChannelCtas; ++b) {
      counts.push_back(b == 0 ? 3 + r : std::size_t(b) * 3000 + 17 * std::size_t(r));
      total += counts.back();
    }
  sym_arena arena(w, 2 * total * sizeof(std::int32_t) + counts.size() * 1024 + 4096);
  const std::uint64_t seed = 1200;
  arena.reset(seed);
  std::vector<std::int32_t*> dsts, srcs;
  auto input_of = [&](std::size_t slot, int pe) {
    return random_values<std::int32_t>((seed * 1000 + slot) * 1024 + std::uint64_t(pe), counts[slot]);
  };
  for (std::size_t slot = 0; slot < counts.size(); ++slot) {
    srcs.push_back(arena.carve<std::int32_t>(counts[slot], slot % 2));
    dsts.push_back(arena.carve<std::int32_t>(counts[slot], slot % 2));
    arena.fill(srcs.back(), input_of(slot, w.pe()));
    arena.will_write(dsts.back(), counts[slot] * sizeof(std::int32_t));
  }
  std::int32_t** d_dsts = device_copy(dsts);
  std::int32_t** d_srcs = device_copy(srcs);
  std::size_t* d_counts = device_copy(counts);
  arena.upload();
  barrier_all(w);
  reduce_per_channel<<<kChannelCtas, 256>>>(t.device_handle(), d_dsts, d_srcs, d_counts);
  wait_for_kernel("reduce per channel");
  const std::vector<std::uint8_t> got = arena.download();
  for (std::size_t slot = 0; slot < counts.size(); ++slot) {
    std::vector<std::vector<std::int32_t>> inputs(n);
    for (int m = 0; m < n; ++m) inputs[m] = input_of(slot, t.pe_of(m));
    EXPECT_TRUE(matches(arena.view(got, dsts[slot], counts[slot]),
                        expected_dst(coll_kind::reduce, reduce_op::sum, t.my_index(), inputs, counts[slot], 0)))
        << "round " << slot / kChannelCtas << ", CTA " << slot % kChannelCtas;
  }
  EXPECT_EQ(arena.first_stray(got), -1);
  cudaFree(d_counts);
  cudaFree(d_srcs);
  cudaFree(d_dsts);
  barrier_all(w);
}

// ---- a staged step's data left in the scratch, then an LL step of the same parity

__global__ void reduce_on_channel_0(team_handle t, std::int32_t* dst, const std::int32_t* src, std::size_t count) {
  reduce(block, t, op::sum, dst, src, count);
}

// The epoch of the last step on the view's first channel (its counter, less the symmetric mark).
std::uint64_t last_epoch(const team_handle& h) {
  std::uint64_t word = 0;
  if (cudaMemcpy(&word, h.calls + h.channel_first, sizeof(word), cudaMemcpyDeviceToHost) != cudaSuccess)
    throw std::runtime_error("reading the channel's step counter failed");
  return word & ~detail::kSymmetricMark;
}

// A one_shot step stages each member's raw data in the others' scratch; an LL step takes a line once its
// two flag words hold the step's flag, which is the epoch itself for a long while. Here the staged data
// holds, where the lines' flag words sit, the epochs of the next steps, and PE 0 enters the LL step late:
// a PE whose LL step polled the staged step's leftovers would take them as PE 0's line and return a wrong
// sum. (SHOAL_TEST_SHARED_SCRATCH=1 points the staged steps at the LL lines, as one region held both,
// to see this test fail.)
TEST(CollMixed, LLStepTakesNoLineFromAStagedStepsData) {
  SHOAL_REQUIRE_WORLD(2);
  SHOAL_REQUIRE_ONE_NODE();  // across nodes no LL runs
  world& w = *the_world();
  team_handle h = world_team(w).device_handle().channels(0, 1);
  if (const char* shared = std::getenv("SHOAL_TEST_SHARED_SCRATCH"); shared != nullptr && shared[0] == '1') {
    h.staged = h.ll;
    h.staged_bytes = h.ll_bytes;
  }
  constexpr std::size_t kLines = 64, kCount = 4 * kLines;  // staged: 16 bytes a line, 4 int32
  auto* src = static_cast<std::int32_t*>(w.malloc(kCount * sizeof(std::int32_t)));
  auto* dst = static_cast<std::int32_t*>(w.malloc(kCount * sizeof(std::int32_t)));
  barrier_all(w);
  const std::uint64_t before = last_epoch(h);  // the staged step's epoch is before + 1
  std::vector<std::int32_t> staged = random_values<std::int32_t>(1300 + std::uint64_t(w.pe()), kCount);
  for (std::size_t j = 0; j < kLines; ++j) staged[4 * j + 1] = staged[4 * j + 3] = std::int32_t(before + j);
  CUDA_OK(cudaMemcpy(src, staged.data(), kCount * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  barrier_all(w);
  reduce_on_channel_0<<<1, 128>>>(h.with_algorithm(collective::reduce, algorithm::one_shot), dst, src, kCount);
  wait_for_kernel("the staged all-reduce");
  // LL steps of one word until the next step has the staged step's parity.
  const team_handle ll = h.with_algorithm(collective::reduce, algorithm::ll);
  while ((last_epoch(h) + 1) % 2 != (before + 1) % 2) {
    reduce_on_channel_0<<<1, 128>>>(ll, dst, src, 1);
    wait_for_kernel("a one-word LL all-reduce");
  }
  ASSERT_LT(last_epoch(h) + 1 - before, kLines) << "the staged data must reach the LL step's line";

  const std::size_t ll_count = 2 * kLines;  // 8 bytes a line: every line the staged data covered
  auto input_of = [](int pe) { return random_values<std::int32_t>(1400 + std::uint64_t(pe), 2 * kLines); };
  CUDA_OK(cudaMemcpy(src, input_of(w.pe()).data(), ll_count * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  barrier_all(w);
  if (w.pe() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  reduce_on_channel_0<<<1, 128>>>(ll, dst, src, ll_count);
  wait_for_kernel("the LL all-reduce");
  std::vector<std::int32_t> got(ll_count), want = input_of(0);
  CUDA_OK(cudaMemcpy(got.data(), dst, ll_count * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  for (int pe = 1; pe < w.n_pes(); ++pe) {
    const std::vector<std::int32_t> theirs = input_of(pe);
    for (std::size_t k = 0; k < ll_count; ++k) want[k] = std::int32_t(std::uint32_t(want[k]) + std::uint32_t(theirs[k]));
  }
  for (std::size_t k = 0; k < ll_count; ++k) EXPECT_EQ(got[k], want[k]) << "element " << k << " (line " << k / 2 << ")";
  barrier_all(w);
  w.free(dst);
  w.free(src);
}

}  // namespace
}  // namespace shoal::gpu_test
