// The on-stream collectives (shoal/coll_stream.hpp): every collective with each algorithm forced through
// SHOAL_ALGO_* and the model's choice; reduce and reducescatter for every element type x operator;
// barrier and sync; many mixed calls back to back on one stream; a CUDA graph of several collectives
// replayed with new inputs; two streams at once on disjoint channel ranges, from one host thread and from
// two; and the host's refusal of bad arguments, after which the team still works. No device template is
// instantiated here: the kernels are the library's.
#include <climits>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <thread>

#include "coll_reference.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

// ---- every collective, every algorithm

TEST(CollStream, EveryCollectiveEveryAlgorithm) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  std::uint64_t seed = 600;
  for (const stream_algorithms& a : kStreamAlgorithms) {
    SCOPED_TRACE(describe(a));
    team t = world_copy_with(w, a);
    run_stream_matrix<std::int32_t>(t, {.kinds = kAllKinds, .counts = {0, 1, 37, 1000, 10000, 65537}}, seed++);
    run_stream_matrix<std::uint8_t>(t, {.kinds = kAllKinds, .counts = {1, 7, 1001, 40003}}, seed++);
  }
}

// The on-stream reductions load their sources two at a time (source_loads::in_pairs). Pull algorithms
// reach the unrolled loop only with at least 32 KiB per CTA: a 16 MiB all-reduce (two-shot) and
// reduce-scatter (direct), below the size where two members switch to the copy engines.
TEST(CollStream, LargePullReductions) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  team t = world_copy_with(w, {"two_shot", "direct", "auto"});
  run_stream_matrix<std::int32_t>(
      t, {.kinds = {coll_kind::reduce, coll_kind::reducescatter}, .counts = {(std::size_t{16} << 20) / 4 + 5}}, 650);
}

// ---- every element type x operator

template <typename T>
class CollStreamTypes : public ::testing::Test {};

using reduce_types =
    ::testing::Types<std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t, std::uint16_t, std::uint32_t,
                     std::uint64_t, __half, __nv_bfloat16, float, double>;

struct type_names {
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, __half>) return "half";
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bfloat16";
    if constexpr (std::is_same_v<T, float>) return "float";
    if constexpr (std::is_same_v<T, double>) return "double";
    if constexpr (std::is_integral_v<T>)
      return std::string(std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
    return "?";
  }
};

TYPED_TEST_SUITE(CollStreamTypes, reduce_types, type_names);

TYPED_TEST(CollStreamTypes, EveryOperatorEveryAlgorithm) {
  SHOAL_REQUIRE_WORLD(1);
  using T = TypeParam;
  world& w = *the_world();
  std::uint64_t seed = 700 + 10 * sizeof(T) + (std::is_integral_v<T> ? 0 : 1000);
  for (const stream_algorithms& a : kStreamAlgorithms) {
    SCOPED_TRACE(describe(a));
    team t = world_copy_with(w, a);
    for (int o = 0; o < kReduceOpCount; ++o) {
      const auto op = static_cast<reduce_op>(o);
      if (!op_defined_for<T>(op)) continue;
      SCOPED_TRACE(std::string("operator ") + std::string(shoal::to_string(op)));
      run_stream_matrix<T>(
          t, {.kinds = {coll_kind::reduce, coll_kind::reducescatter}, .counts = {1, 37, 10000}, .op = op}, seed++);
    }
  }
}

// ---- barrier and sync

__global__ void put_round(device_handle h, const team_handle t, int* slots, int round) {
  const int n = t.layout.size;
  for (int i = 0; i < n; ++i) p(h, slots + (round % 2) * n + t.index, round, t.layout.pe_at(i));
  quiet(h);
}

// Each round every member writes the round into its slot on every member (a put_on_stream for barrier,
// a kernel that completes its stores for sync), the team meets on the stream, and then every slot must
// hold this round. Two rows alternate so a fast member cannot overwrite a value a slow one still checks.
TEST(CollStream, BarrierAndSync) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const team& t = world_team(w);
  const int n = t.size();
  test_stream s;
  auto* slots = static_cast<int*>(w.calloc(2 * std::size_t(n), sizeof(int)));
  int* mine = nullptr;
  ASSERT_EQ(cudaMallocHost(&mine, sizeof(int)), cudaSuccess);
  for (bool use_sync : {false, true}) {
    SCOPED_TRACE(use_sync ? "sync_on_stream" : "barrier_on_stream");
    for (int r = 1; r <= 30; ++r) {
      if (use_sync) {
        put_round<<<1, 1, 0, s>>>(w.device_handle(), t.device_handle(), slots, r);
        sync_on_stream(t, s);
      } else {
        s.wait("previous round");
        *mine = r;
        for (int i = 0; i < n; ++i) put_on_stream(w, slots + (r % 2) * n + t.my_index(), mine, sizeof(int), i, s);
        barrier_on_stream(t, s);
      }
      s.wait("meeting");
      std::vector<int> got(2 * std::size_t(n));
      ASSERT_EQ(cudaMemcpy(got.data(), slots, got.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
      for (int i = 0; i < n; ++i) EXPECT_EQ(got[(r % 2) * n + i], r) << "round " << r << ", member " << i;
    }
    barrier_all(w);
  }
  cudaFreeHost(mine);
  w.free(slots);
}

// ---- batches of calls checked together

// A list of collectives on distinct regions of one arena, enqueued back to back without host
// synchronization, then all checked. Regions are carved in the order of the list, so a batch built
// again with the same steps on the same arena lands at the same addresses (as a captured graph needs).
template <typename T>
class step_batch {
 public:
  step_batch(sym_arena& arena, const team& t, std::vector<coll_case> steps, std::uint64_t seed)
      : t_(&t), steps_(std::move(steps)), seed_(seed), n_(std::max(t.size(), 1)) {
    world& w = arena.owner();
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const coll_case& c = steps_[i];
      T* src = arena.carve<T>(src_elements(c.kind, c.count, n_), c.src_misalign);
      T* dst = c.in_place ? src : arena.carve<T>(dst_elements(c.kind, c.count, n_), c.dst_misalign);
      if (t.member()) {
        arena.fill(src, input_of(i, w.pe()));
        arena.will_write(dst, dst_elements(c.kind, c.count, n_) * sizeof(T));
      }
      regions_.push_back({dst, src});
    }
  }

  // Bytes an arena needs for `steps` on a team of n.
  static std::size_t bytes_for(const std::vector<coll_case>& steps, int n) {
    std::size_t bytes = 4096;
    for (const coll_case& c : steps)
      bytes += (src_elements(c.kind, c.count, n) + dst_elements(c.kind, c.count, n) + 2) * sizeof(T) + 1024;
    return bytes;
  }

  void enqueue(cudaStream_t stream, channel_range channels = {}) const {
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const coll_case& c = steps_[i];
      enqueue_on_stream(*t_, c.kind, c.op, regions_[i].first, regions_[i].second, c.count, c.root, stream, channels);
    }
  }

  void check(const sym_arena& arena, const std::vector<std::uint8_t>& got) const {
    if (!t_->member()) return;
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const coll_case& c = steps_[i];
      std::vector<std::vector<T>> inputs(n_);
      for (int m = 0; m < n_; ++m) inputs[m] = input_of(i, t_->pe_of(m));
      EXPECT_TRUE(matches(arena.view(got, regions_[i].first, dst_elements(c.kind, c.count, n_)),
                          expected_dst(c.kind, c.op, t_->my_index(), inputs, c.count, c.root)))
          << "step " << i << ": " << c.describe();
    }
  }

  const std::vector<std::pair<T*, T*>>& regions() const { return regions_; }

 private:
  std::vector<T> input_of(std::size_t step, int pe) const {
    const coll_case& c = steps_[step];
    return random_values<T>((seed_ * 1000 + step) * 1024 + std::uint64_t(pe), src_elements(c.kind, c.count, n_), c.op);
  }

  const team* t_;
  std::vector<coll_case> steps_;
  std::uint64_t seed_;
  int n_;
  std::vector<std::pair<T*, T*>> regions_;  // {dst, src}
};

// `rounds` rounds of every kind with sizes that cross the model's thresholds (small LL sizes, and every
// seventh round a large one), operators cycling through all seven, roots moving, every third call
// misaligned, and in-place reduces.
std::vector<coll_case> mixed_steps(int rounds, int n, std::uint64_t salt) {
  std::vector<coll_case> steps;
  for (int r = 0; r < rounds; ++r) {
    for (coll_kind kind : kAllKinds) {
      const std::size_t i = steps.size() + salt;
      const std::size_t count = r % 7 == 6 ? 20000 + r : 1 + (i * 37) % 700;
      const bool in_place = kind == coll_kind::reduce && r % 4 == 3;
      steps.push_back({.kind = kind,
                       .op = static_cast<reduce_op>(i % kReduceOpCount),
                       .count = count,
                       .src_misalign = i % 3 == 1 ? 1u : 0u,
                       .dst_misalign = i % 3 == 1 ? 2u : 0u,
                       .in_place = in_place,
                       .root = int(i % std::size_t(n))});
    }
  }
  return steps;
}

TEST(CollStream, ManyMixedCallsBackToBack) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const team& t = world_team(w);
  const std::vector<coll_case> steps = mixed_steps(50, t.size(), 0);
  sym_arena arena(w, step_batch<std::int32_t>::bytes_for(steps, t.size()));
  test_stream s;
  for (int pass = 0; pass < 2; ++pass) {
    arena.reset(800 + pass);
    step_batch<std::int32_t> batch(arena, t, steps, 800 + pass);
    arena.upload();
    barrier_all(w);
    batch.enqueue(s);  // 250 calls, no host synchronization between them
    s.wait("mixed calls");
    batch.check(arena, arena.download());
    EXPECT_EQ(arena.first_stray(arena.download()), -1) << "a byte outside every dst changed";
    barrier_all(w);
  }
}

// Two streams at once, each with its own half of the team's channels: the calls of one stream never
// wait for the other's, and neither corrupts the other's state. With `second_thread` the second stream's
// calls are made by another host thread while this one makes the first's: a thread's first on-stream call
// looks the kernels up for itself (detail::launch_kernel), and the two threads enqueue at the same time.
void check_concurrent_streams(bool second_thread) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const team& t = world_team(w);
  const int channels = t.device_handle().channel_count;
  if (channels < 2) GTEST_SKIP() << "the team has " << channels << " channel (SHOAL_TEAM_CHANNELS)";
  const channel_range first_half{0, channels / 2}, second_half{channels / 2, 0};
  const std::vector<coll_case> a_steps = mixed_steps(20, t.size(), 1), b_steps = mixed_steps(20, t.size(), 2);
  sym_arena arena(
      w, step_batch<std::int32_t>::bytes_for(a_steps, t.size()) + step_batch<float>::bytes_for(b_steps, t.size()));
  test_stream sa, sb;
  // float has no bit operators: the second stream's reductions use sum, prod, min and max.
  std::vector<coll_case> float_steps = b_steps;
  for (coll_case& c : float_steps) c.op = static_cast<reduce_op>(int(c.op) % 4);
  arena.reset(900);
  step_batch<std::int32_t> a(arena, t, a_steps, 900);
  step_batch<float> b(arena, t, float_steps, 901);
  arena.upload();
  barrier_all(w);
  if (second_thread) {
    int device = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    std::exception_ptr failed;
    std::thread other([&] {
      try {
        if (cudaSetDevice(device) != cudaSuccess) throw std::runtime_error("cudaSetDevice in the second thread");
        b.enqueue(sb, second_half);
      } catch (...) {
        failed = std::current_exception();
      }
    });
    a.enqueue(sa, first_half);
    other.join();
    if (failed) std::rethrow_exception(failed);
  } else {
    a.enqueue(sa, first_half);
    b.enqueue(sb, second_half);
  }
  sa.wait("stream A");
  sb.wait("stream B");
  const std::vector<std::uint8_t> got = arena.download();
  a.check(arena, got);
  b.check(arena, got);
  EXPECT_EQ(arena.first_stray(got), -1);
  barrier_all(w);
}

TEST(CollStream, ConcurrentStreamsOnDisjointChannels) { check_concurrent_streams(false); }
TEST(CollStream, ConcurrentStreamsFromTwoHostThreads) { check_concurrent_streams(true); }

// A graph capturing collectives of several kinds and types (and a barrier between them), replayed 20
// times: before each replay every PE writes new inputs at the same addresses; each replay is checked.
// Captures a mix of on-stream collectives of team `t` once and replays the graph with new inputs.
void check_graph_replay(const team& t) {
  world& w = t.owner();
  const int n = t.size();
  const std::vector<coll_case> int_steps = {
      {.kind = coll_kind::reduce, .op = reduce_op::sum, .count = 1000},
      {.kind = coll_kind::reducescatter, .op = reduce_op::bit_xor, .count = 333, .src_misalign = 1, .dst_misalign = 2},
      {.kind = coll_kind::broadcast, .count = 5000, .root = n - 1},
      {.kind = coll_kind::fcollect, .count = 77},
      {.kind = coll_kind::alltoall, .count = 4099},
      {.kind = coll_kind::reduce, .op = reduce_op::max, .count = 30000, .in_place = true},
  };
  const std::vector<coll_case> half_steps = {
      {.kind = coll_kind::reduce, .op = reduce_op::sum, .count = 2049},
      {.kind = coll_kind::reducescatter, .op = reduce_op::min, .count = 100, .src_misalign = 3, .dst_misalign = 0},
  };
  sym_arena arena(w, step_batch<std::int32_t>::bytes_for(int_steps, n) + step_batch<__half>::bytes_for(half_steps, n));
  test_stream s;

  // Capture, from a first layout of the arena (every replay rebuilds the same layout).
  arena.reset(1000);
  std::vector<std::pair<std::int32_t*, std::int32_t*>> captured_regions;
  cudaGraph_t graph = nullptr;
  {
    step_batch<std::int32_t> ints(arena, t, int_steps, 1000);
    step_batch<__half> halves(arena, t, half_steps, 1000);
    captured_regions = ints.regions();
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    ints.enqueue(s);
    barrier_on_stream(t, s);
    halves.enqueue(s);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  }
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  for (int replay = 0; replay < 20; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    const std::uint64_t seed = 1001 + replay;
    arena.reset(seed);
    step_batch<std::int32_t> ints(arena, t, int_steps, seed);
    step_batch<__half> halves(arena, t, half_steps, seed);
    ASSERT_EQ(ints.regions(), captured_regions);
    arena.upload();
    barrier_all(w);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    s.wait("graph replay");
    const std::vector<std::uint8_t> got = arena.download();
    ints.check(arena, got);
    halves.check(arena, got);
    EXPECT_EQ(arena.first_stray(got), -1);
    barrier_all(w);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(CollStream, GraphReplayWithNewInputs) {
  SHOAL_REQUIRE_WORLD(1);
  check_graph_replay(world_team(*the_world()));
}

// How many copy nodes a CUDA graph holds after capturing enqueue(stream): the copy-engine paths enqueue
// cudaMemcpyAsync, the kernel paths none. The graph is launched once, so every member's calls stay
// matched; its data is not checked (the tests above check the same calls).
template <typename Enqueue>
std::size_t copies_in_capture(Enqueue&& enqueue) {
  test_stream s;
  cudaGraph_t graph = nullptr;
  auto check = [](cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  };
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  enqueue(static_cast<cudaStream_t>(s));
  check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  std::size_t count = 0;
  check(cudaGraphGetNodes(graph, nullptr, &count), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(count);
  check(cudaGraphGetNodes(graph, nodes.data(), &count), "cudaGraphGetNodes");
  std::size_t copies = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
    copies += type == cudaGraphNodeTypeMemcpy ? 1 : 0;
  }
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
  s.wait("captured call");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return copies;
}

// Symmetric int32 buffers of `count` elements per member for copies_in_capture, freed with it.
struct capture_buffers {
  capture_buffers(world& w, std::size_t count) : w(w) {
    src = static_cast<std::int32_t*>(w.calloc(count * std::size_t(w.n_pes()), sizeof(std::int32_t)));
    dst = static_cast<std::int32_t*>(w.calloc(count * std::size_t(w.n_pes()), sizeof(std::int32_t)));
  }
  ~capture_buffers() {
    w.free(dst);
    w.free(src);
  }
  capture_buffers(const capture_buffers&) = delete;
  capture_buffers& operator=(const capture_buffers&) = delete;
  world& w;
  std::int32_t *src = nullptr, *dst = nullptr;
};

// Direct broadcast, fcollect and alltoall move blocks from SHOAL_COLL_CE_BYTES up with the copy engines
// (a fork to the world's side stream for the own block, and meeting kernels around the copies). With
// the threshold at 1 byte every direct exchange takes that path: every layout and size, then a graph.
TEST(CollStream, CopyEngineExchanges) {
  SHOAL_REQUIRE_WORLD(1);
  SHOAL_REQUIRE_ONE_NODE();  // copy engines reach only mapped peers (teams across nodes never use them)
  world& w = *the_world();
  scoped_env env({{"SHOAL_COLL_CE_BYTES", "1"}});
  team t = world_copy_with(w, {"two_shot", "direct", "direct"});
  ASSERT_EQ(t.copy_engine_bytes(), 1u);
  const std::vector<coll_kind> exchanges = {coll_kind::broadcast, coll_kind::fcollect, coll_kind::alltoall};
  run_stream_matrix<std::int32_t>(t, {.kinds = exchanges, .counts = {1, 37, 10000, 65537}}, 710);
  run_stream_matrix<std::uint8_t>(t, {.kinds = exchanges, .counts = {1, 7, 40003}}, 711);
  check_graph_replay(t);
  // The copy engines really ran: each exchange's capture holds copies (for broadcast, the root's: the
  // others only receive).
  capture_buffers b(w, 4096);
  const std::size_t broadcast_copies =
      copies_in_capture([&](cudaStream_t s) { broadcast_on_stream(t, b.dst, b.src, 4096, 0, s); });
  if (t.my_index() == 0) EXPECT_GT(broadcast_copies, 0u);
  EXPECT_GT(copies_in_capture([&](cudaStream_t s) { fcollect_on_stream(t, b.dst, b.src, 4096, s); }), 0u);
  EXPECT_GT(copies_in_capture([&](cudaStream_t s) { alltoall_on_stream(t, b.dst, b.src, 4096, s); }), 0u);
}

// A two-member team's out-of-place two-shot all-reduce moves its halves with the copy engines once each
// half reaches SHOAL_COLL_CE_BYTES, and its direct reduce-scatter once each block passes twice that
// (coll/copy_engine_reduce.hpp). With the threshold at 1 byte nearly every such call takes that path (a
// reduce-scatter of 1- or 2-byte blocks stays on the kernel path): every operator on int32, sums of
// bfloat16, max of float, xor of bytes, odd and misaligned counts, and buffers of several 16 MiB chunks;
// an in-place all-reduce stays on the kernel path; then a graph.
TEST(CollStream, CopyEngineReductions) {
  SHOAL_REQUIRE_WORLD(2);
  SHOAL_REQUIRE_ONE_NODE();
  world& w = *the_world();
  if (w.n_pes() != 2) GTEST_SKIP() << "the copy-engine reductions are for teams of two; this job has " << w.n_pes();
  scoped_env env({{"SHOAL_COLL_CE_BYTES", "1"}});
  team t = world_copy_with(w, {"two_shot", "direct", "direct"});
  const std::vector<coll_kind> kinds = {coll_kind::reduce, coll_kind::reducescatter};
  std::uint64_t seed = 720;
  for (int o = 0; o < kReduceOpCount; ++o) {
    const auto op = static_cast<reduce_op>(o);
    SCOPED_TRACE(std::string("operator ") + std::string(shoal::to_string(op)));
    run_stream_matrix<std::int32_t>(t, {.kinds = kinds, .counts = {1, 2, 37, 10000, 65537}, .op = op}, seed++);
  }
  run_stream_matrix<__nv_bfloat16>(t, {.kinds = kinds, .counts = {3, 40003}}, seed++);
  run_stream_matrix<float>(t, {.kinds = kinds, .counts = {5, 65537}, .op = reduce_op::max}, seed++);
  run_stream_matrix<std::uint8_t>(t, {.kinds = kinds, .counts = {1, 7, 40003}, .op = reduce_op::bit_xor}, seed++);
  // A 34 MiB all-reduce (halves of two chunks) and reduce-scatter blocks of 34 MiB (three chunks); the last
  // chunk of each is shorter.
  run_stream_matrix<std::int32_t>(
      t, {.kinds = kinds, .counts = {(std::size_t{34} << 20) / 4 + 3}, .misaligned = false, .in_place = false}, seed++);
  check_graph_replay(t);
  // The copy engines really ran for the out-of-place calls, and not for the in-place all-reduce.
  capture_buffers b(w, 4096);
  EXPECT_GT(copies_in_capture([&](cudaStream_t s) { reduce_on_stream(t, b.dst, b.src, 4096, reduce_op::sum, s); }), 0u);
  EXPECT_GT(
      copies_in_capture([&](cudaStream_t s) { reducescatter_on_stream(t, b.dst, b.src, 4096, reduce_op::sum, s); }),
      0u);
  EXPECT_EQ(copies_in_capture([&](cudaStream_t s) { reduce_on_stream(t, b.src, b.src, 4096, reduce_op::sum, s); }), 0u);
}

// ---- registered buffers

// Device memory from cudaMalloc made symmetric with register_buffer serves as src and dst (as a
// framework's tensors would); a count that runs past the registered buffer is refused.
TEST(CollStream, RegisteredBuffers) {
  SHOAL_REQUIRE_WORLD(1);
  SHOAL_REQUIRE_ONE_NODE();
  world& w = *the_world();
  const team& t = world_team(w);
  const int n = t.size(), me = t.my_index();
  constexpr std::size_t kCount = 3001;
  const std::size_t bytes = kCount * std::size_t(n) * sizeof(float);
  float *src = nullptr, *dst = nullptr;
  ASSERT_EQ(cudaMalloc(&src, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dst, bytes), cudaSuccess);
  w.register_buffer(src, bytes);
  w.register_buffer(dst, bytes);
  test_stream s;
  std::uint64_t seed = 1300;
  for (coll_kind kind : kAllKinds) {
    SCOPED_TRACE(to_string(kind));
    const std::size_t src_len = src_elements(kind, kCount, n), dst_len = dst_elements(kind, kCount, n);
    auto input_of = [&](int pe) { return random_values<float>(seed * 1024 + std::uint64_t(pe), src_len); };
    const std::vector<float> mine = input_of(w.pe());
    ASSERT_EQ(cudaMemcpy(src, mine.data(), src_len * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    barrier_all(w);
    enqueue_on_stream(t, kind, reduce_op::sum, dst, src, kCount, n - 1, s);
    s.wait(to_string(kind));
    std::vector<float> got(dst_len);
    ASSERT_EQ(cudaMemcpy(got.data(), dst, dst_len * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<std::vector<float>> inputs(n);
    for (int m = 0; m < n; ++m) inputs[m] = input_of(t.pe_of(m));
    EXPECT_TRUE(matches(got, expected_dst(kind, reduce_op::sum, me, inputs, kCount, n - 1)));
    barrier_all(w);
    ++seed;
  }
  EXPECT_THROW(reduce_on_stream(t, dst, src, kCount * std::size_t(n) + 1, reduce_op::sum, s), shoal::error);
  EXPECT_THROW(fcollect_on_stream(t, dst, src, kCount + 1, s), shoal::error);
  EXPECT_THROW(broadcast_on_stream(t, dst + 1, src, kCount * std::size_t(n), 0, s), shoal::error);
  s.wait("nothing was enqueued");
  w.unregister_buffer(dst);
  w.unregister_buffer(src);
  cudaFree(dst);
  cudaFree(src);
}

// ---- bad arguments

// Every refused call throws shoal::error on every PE alike (so no PE enqueues a collective the others
// do not), enqueues nothing, and leaves the team usable.
TEST(CollStream, BadArgumentsThrowAndTeamStaysUsable) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const team& t = world_team(w);
  const int n = t.size();
  test_stream s;
  constexpr std::size_t kElems = 256;
  auto* sym = w.malloc_array<float>(kElems * std::size_t(n));
  auto* isym = w.malloc_array<std::int32_t>(kElems * std::size_t(n));
  float* local = nullptr;
  ASSERT_EQ(cudaMalloc(&local, kElems * std::size_t(n) * sizeof(float)), cudaSuccess);
  std::vector<float> host(kElems * std::size_t(n));
  // Every PE its own team of one, where every PE is the root. Broadcast checks src on every member, not only
  // the root (which would throw alone while the others enqueued the kernel and waited): tested on both.
  auto [self, column] = split_2d(w, t, 1);

  {
    SCOPED_TRACE("not symmetric: device memory from cudaMalloc, and host memory");
    for (float* bad : {local, host.data()}) {
      EXPECT_THROW(reduce_on_stream(t, bad, sym, 8, reduce_op::sum, s), shoal::error);
      EXPECT_THROW(reduce_on_stream(t, sym, bad, 8, reduce_op::sum, s), shoal::error);
      EXPECT_THROW(reducescatter_on_stream(t, bad, sym, 8, reduce_op::sum, s), shoal::error);
      EXPECT_THROW(reducescatter_on_stream(t, sym, bad, 8, reduce_op::sum, s), shoal::error);
      EXPECT_THROW(broadcast_on_stream(t, bad, sym, 8, 0, s), shoal::error);
      EXPECT_THROW(broadcast_on_stream(self, sym, bad, 8, 0, s), shoal::error);
      EXPECT_THROW(broadcast_on_stream(t, sym, bad, 8, 0, s), shoal::error);
      EXPECT_THROW(fcollect_on_stream(t, bad, sym, 8, s), shoal::error);
      EXPECT_THROW(fcollect_on_stream(t, sym, bad, 8, s), shoal::error);
      EXPECT_THROW(alltoall_on_stream(t, bad, sym, 8, s), shoal::error);
      EXPECT_THROW(alltoall_on_stream(t, sym, bad, 8, s), shoal::error);
    }
  }
  {
    SCOPED_TRACE("too short: the buffer runs past the end of the symmetric heap");
    const std::size_t past = w.heap_usage().mapped / sizeof(float) + 1;
    float* other = sym + kElems;  // a disjoint symmetric buffer for the argument not under test
    EXPECT_THROW(reduce_on_stream(t, sym, sym, past, reduce_op::sum, s), shoal::error);
    EXPECT_THROW(reducescatter_on_stream(t, sym, other, past / std::size_t(n) + 1, reduce_op::sum, s), shoal::error);
    EXPECT_THROW(broadcast_on_stream(t, sym, other, past, 0, s), shoal::error);
    EXPECT_THROW(fcollect_on_stream(t, sym, other, past / std::size_t(n) + 1, s), shoal::error);
    EXPECT_THROW(alltoall_on_stream(t, sym, other, past / std::size_t(n) + 1, s), shoal::error);
  }
  {
    SCOPED_TRACE("root outside the team");
    for (int root : {-1, n, n + 7}) {
      EXPECT_THROW(broadcast_on_stream(t, sym, sym + kElems, 8, root, s), shoal::error) << "root " << root;
      EXPECT_THROW(broadcast_on_stream(self, sym, sym + kElems, 8, root == -1 ? -1 : 1, s), shoal::error);
    }
  }
  {
    SCOPED_TRACE("bit operators on floating types");
    auto* dbl = reinterpret_cast<double*>(sym);
    auto* hlf = reinterpret_cast<__half*>(sym);
    auto* bf = reinterpret_cast<__nv_bfloat16*>(sym);
    for (reduce_op op : {reduce_op::bit_and, reduce_op::bit_or, reduce_op::bit_xor}) {
      EXPECT_THROW(reduce_on_stream(t, sym, sym, 8, op, s), shoal::error);
      EXPECT_THROW(reducescatter_on_stream(t, sym, sym + kElems, 8, op, s), shoal::error);
      EXPECT_THROW(reduce_on_stream(t, dbl, dbl, 8, op, s), shoal::error);
      EXPECT_THROW(reduce_on_stream(t, hlf, hlf, 8, op, s), shoal::error);
      EXPECT_THROW(reducescatter_on_stream(t, bf, bf + kElems, 8, op, s), shoal::error);
    }
  }
  {
    SCOPED_TRACE("dst and src partly overlap");
    EXPECT_THROW(reduce_on_stream(t, sym + 1, sym, 8, reduce_op::sum, s), shoal::error);
    EXPECT_THROW(reduce_on_stream(t, isym, isym + 7, 8, reduce_op::bit_or, s), shoal::error);
    EXPECT_THROW(reducescatter_on_stream(t, sym, sym, 8, reduce_op::sum, s), shoal::error);  // no in-place form
    EXPECT_THROW(fcollect_on_stream(t, sym, sym + 1, 8, s), shoal::error);
    EXPECT_THROW(alltoall_on_stream(t, sym + 3, sym, 8, s), shoal::error);
    EXPECT_THROW(broadcast_on_stream(self, sym + 1, sym, 8, 0, s), shoal::error);
    EXPECT_THROW(broadcast_on_stream(t, sym + 1, sym, 8, 0, s), shoal::error);
  }
  {
    SCOPED_TRACE("channels outside the team's");
    const int channels = t.device_handle().channel_count;
    for (channel_range bad : {channel_range{channels, 1}, channel_range{-1, 1}, channel_range{0, channels + 1},
                              channel_range{channels - 1, 2}, channel_range{0, -1}, channel_range{1, INT_MAX}}) {
      SCOPED_TRACE("channels {" + std::to_string(bad.first) + ", " + std::to_string(bad.count) + "}");
      EXPECT_THROW(reduce_on_stream(t, sym, sym + kElems, 8, reduce_op::sum, s, bad), shoal::error);
      EXPECT_THROW(fcollect_on_stream(t, sym, sym + kElems, 8, s, bad), shoal::error);
      EXPECT_THROW(barrier_on_stream(t, s, bad), shoal::error);
    }
  }
  {
    SCOPED_TRACE("a count of 0 with null buffers is no call, and a reduce_op outside the enumeration is refused");
    EXPECT_NO_THROW(reduce_on_stream<float>(t, nullptr, nullptr, 0, reduce_op::sum, s));
    EXPECT_NO_THROW(reducescatter_on_stream<float>(t, nullptr, nullptr, 0, reduce_op::max, s));
    EXPECT_NO_THROW(broadcast_on_stream<float>(t, nullptr, nullptr, 0, 0, s));
    EXPECT_NO_THROW(fcollect_on_stream<float>(t, nullptr, nullptr, 0, s));
    EXPECT_NO_THROW(alltoall_on_stream<float>(t, nullptr, nullptr, 0, s));
    EXPECT_THROW(reduce_on_stream(t, sym, sym, 8, static_cast<reduce_op>(kReduceOpCount), s), shoal::error);
  }
  s.wait("nothing was enqueued");
  cudaFree(local);
  w.free(isym);
  w.free(sym);
  barrier_all(w);

  // Still usable: every collective, on the team and on the teams of one.
  run_stream_matrix<float>(t, {.kinds = kAllKinds, .counts = {37, 1000}}, 1100);
  run_stream_matrix<float>(self, {.kinds = kAllKinds, .counts = {37}}, 1101);
}

// Counts whose size in bytes overflows size_t. The wrapped product was small, so it passed the buffer checks
// and the call went ahead: a few bytes moved where the user asked for a count that cannot exist, or a kernel
// ran on the count itself, far past the buffers. Each call now throws before it enqueues anything, naming
// itself and the count. (Before the fix the reductions and the byte-form alltoall below wrote past the heap.)
TEST(CollStream, OverflowingCountsThrow) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const team& t = world_team(w);
  const std::size_t n = static_cast<std::size_t>(t.size());
  test_stream s;
  auto* sym = w.malloc_array<float>(64 * n);
  float* other = sym + 32 * n;
  // (SIZE_MAX / 4 + 2) x 4 bytes wraps to 4 bytes.
  const std::size_t wraps_typed = SIZE_MAX / sizeof(float) + 2;
  try {
    broadcast_on_stream(t, sym, other, wraps_typed, 0, s);
    ADD_FAILURE() << "broadcast_on_stream accepted a count of " << wraps_typed << " floats";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.category(), errc::invalid_argument) << e.what();
    EXPECT_EQ(e.context(), "shoal::broadcast_on_stream") << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(wraps_typed)), std::string::npos) << e.what();
  }
  EXPECT_THROW(fcollect_on_stream(t, sym, other, wraps_typed, s), shoal::error);
  EXPECT_THROW(alltoall_on_stream(t, sym, other, wraps_typed, s), shoal::error);
  if (n >= 2) {
    // SIZE_MAX / n + 1 bytes per member, times n members, wraps below n bytes.
    const std::size_t wraps_per_member = SIZE_MAX / n + 1;
    EXPECT_THROW(fcollect_bytes_on_stream(t, sym, other, wraps_per_member, s), shoal::error);
    EXPECT_THROW(alltoall_bytes_on_stream(t, sym, other, wraps_per_member, s), shoal::error);
    EXPECT_THROW(reducescatter_on_stream(t, sym, other, wraps_per_member / sizeof(float) + 1, reduce_op::sum, s),
                 shoal::error);
  }
  EXPECT_THROW(reduce_on_stream(t, sym, other, wraps_typed, reduce_op::sum, s), shoal::error);
  EXPECT_THROW(reducescatter_on_stream(t, sym, other, wraps_typed, reduce_op::sum, s), shoal::error);
  s.wait("nothing was enqueued");
  w.free(sym);
  run_stream_matrix<float>(t, {.kinds = kAllKinds, .counts = {37}}, 1110);
}

}  // namespace
}  // namespace shoal::gpu_test
