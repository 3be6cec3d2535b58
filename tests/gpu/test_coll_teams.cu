// Teams: the predefined teams and user teams from split_strided and split_2d, for any number of PEs
// (on one PE and two PEs this covers teams of one and of two members). For each team: the host
// queries and the device queries (team_my_pe, team_n_pes, team_pe, team_translate_pe) against member
// lists worked out here from the definitions, then every collective through the device API and on a
// stream, on the members only. Also what the host must reject: a destroyed team, a PE outside the team,
// bad split arguments and a bad SHOAL_ALGO_* value.
#include "coll_reference.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

// out = {team_my_pe, team_n_pes, team_pe(i) for i < n_pes, team_translate_pe(t, i, other) for
// i < n_pes, team_translate_pe(other, j, t) for j < other's n_pes, team_pe(t, -1), team_pe(t, n_pes)}.
__global__ void team_queries(team_handle t, team_handle other, int* out) {
  const int n = team_n_pes(t), n_other = team_n_pes(other);
  int k = 0;
  out[k++] = team_my_pe(t);
  out[k++] = n;
  for (int i = 0; i < n; ++i) out[k++] = team_pe(t, i);
  for (int i = 0; i < n; ++i) out[k++] = team_translate_pe(t, i, other);
  for (int j = 0; j < n_other; ++j) out[k++] = team_translate_pe(other, j, t);
  out[k++] = team_pe(t, -1);
  out[k++] = team_pe(t, n);
}

int index_in(const std::vector<int>& members, int pe) {
  auto it = std::find(members.begin(), members.end(), pe);
  return it == members.end() ? -1 : int(it - members.begin());
}

// Checks the host and device queries of `t` against `members` (world PEs in team order, or empty when
// this PE is outside a team whose members it cannot know) and its translations into `other`, whose
// members are `other_members`.
void check_queries(const team& t, const std::vector<int>& members, const team& other,
                   const std::vector<int>& other_members) {
  world& w = t.owner();
  const int me = index_in(members, w.pe());
  ASSERT_TRUE(t.valid());
  EXPECT_EQ(t.member(), me >= 0);
  EXPECT_EQ(t.my_index(), me);
  if (me < 0 && members.empty()) return;
  const int n = int(members.size());
  EXPECT_EQ(t.size(), n);
  std::vector<int> want = {me, n};
  for (int i = 0; i < n; ++i) want.push_back(members[i]);
  for (int i = 0; i < n; ++i) want.push_back(index_in(other_members, members[i]));
  for (int pe : other_members) want.push_back(index_in(members, pe));
  want.push_back(-1);
  want.push_back(-1);

  // The host's answers.
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(t.pe_of(i), members[i]) << "member " << i;
    EXPECT_EQ(t.translate(i, other), index_in(other_members, members[i])) << "member " << i;
  }
  for (int j = 0; j < int(other_members.size()); ++j)
    EXPECT_EQ(other.translate(j, t), index_in(members, other_members[j])) << "member " << j << " of the other team";
  EXPECT_EQ(t.pe_of(-1), -1);
  EXPECT_EQ(t.pe_of(n), -1);

  // The device's answers.
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, want.size() * sizeof(int)), cudaSuccess);
  team_queries<<<1, 1>>>(t.device_handle(), other.device_handle(), out);
  wait_for_kernel("team_queries");
  std::vector<int> got(want.size());
  ASSERT_EQ(cudaMemcpy(got.data(), out, got.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(out);
  EXPECT_EQ(got, want) << "device queries: {my_pe, n_pes, team_pe..., translate to other..., translate from "
                          "other..., team_pe(-1), team_pe(n)}";
}

std::vector<int> all_pes(int n) {
  std::vector<int> pes(n);
  for (int i = 0; i < n; ++i) pes[i] = i;
  return pes;
}

// Every collective on `t` through the device API at block and grid scope, and on a stream. Members run
// them; every PE of the world calls (the arena and the host barriers are collective over the world).
void check_collectives(const team& t, std::uint64_t seed) {
  SCOPED_TRACE("team of " + std::to_string(t.size()) + (t.member() ? "" : " (this PE is outside)"));
  const matrix_options m{.kinds = kAllKinds, .counts = {0, 1, 37, 1000}};
  for (scope_kind scope : {scope_kind::block, scope_kind::grid}) {
    SCOPED_TRACE(std::string("device API at ") + to_string(scope) + " scope");
    run_matrix<std::int32_t>(t, m, seed++, device_api_at<std::int32_t>(scope));
  }
  SCOPED_TRACE("on a stream");
  const matrix_options on_stream{.kinds = kAllKinds, .counts = {1, 37, 10000}};
  run_stream_matrix<float>(t, on_stream, seed);
}

TEST(CollTeams, PredefinedQueries) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const team& world_t = world_team(w);
  const team& node_t = node_team(w);
  const team& same_t = same_local_rank_team(w);
  const std::vector<int> everyone = all_pes(w.n_pes());
  check_queries(world_t, everyone, world_t, everyone);

  // node_team: this PE's node when its PEs are numbered consecutively, else this PE alone.
  // same_local_rank_team: the PEs with this PE's node-local index, one per node, when every node holds as
  // many consecutively numbered PEs; else this PE alone.
  const int local_size = w.bootstrap().local_size(), local_pe = w.bootstrap().local_pe();
  const auto node_pes = w.bootstrap().node_pes();
  std::vector<int> node(node_pes.begin(), node_pes.end());
  bool contiguous = true;
  for (int i = 0; i < int(node.size()); ++i) contiguous &= node[i] == node[0] + i;
  if (!contiguous) node = {w.pe()};
  check_queries(node_t, node, world_t, everyone);
  // Whether every node is regular is the whole job's fact: gather each PE's place in its node.
  struct place {
    int node, local_pe, local_size;
  } mine{w.bootstrap().node(), local_pe, local_size};
  std::vector<place> all(std::size_t(w.n_pes()));
  w.bootstrap().all_gather(&mine, all.data(), sizeof(place));
  bool uniform = w.n_pes() % local_size == 0;
  for (int pe = 0; pe < w.n_pes(); ++pe) {
    const place& p = all[std::size_t(pe)];
    uniform &= p.local_size == local_size && p.local_pe == pe % local_size &&
               p.node == all[std::size_t(pe - pe % local_size)].node;
  }
  std::vector<int> same;
  if (uniform)
    for (int pe = local_pe; pe < w.n_pes(); pe += local_size) same.push_back(pe);
  else
    same = {w.pe()};
  check_queries(same_t, same, node_t, node);
}

TEST(CollTeams, PredefinedTeamsRunCollectives) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  check_collectives(node_team(w), 100);
  // On one node this team holds this PE alone: collectives on a team of one.
  check_collectives(same_local_rank_team(w), 110);
}

struct strided_spec {
  int start, stride, size;
};

// Valid splits of the world team for n PEs: all, the evens, the last PE alone, every PE but the first,
// every third from 1.
std::vector<strided_spec> strided_specs(int n) {
  std::vector<strided_spec> specs = {{0, 1, n}, {0, 2, (n + 1) / 2}, {n - 1, 1, 1}};
  if (n >= 2) specs.push_back({1, 1, n - 1});
  if (n >= 5) specs.push_back({1, 3, (n - 2) / 3 + 1});
  return specs;
}

TEST(CollTeams, SplitStrided) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const std::vector<int> everyone = all_pes(w.n_pes());
  std::uint64_t seed = 200;
  for (const strided_spec& s : strided_specs(w.n_pes())) {
    SCOPED_TRACE("split_strided(start " + std::to_string(s.start) + ", stride " + std::to_string(s.stride) + ", size " +
                 std::to_string(s.size) + ")");
    team t = split_strided(w, world_team(w), s.start, s.stride, s.size);
    std::vector<int> members;
    for (int i = 0; i < s.size; ++i) members.push_back(s.start + i * s.stride);
    check_queries(t, members, world_team(w), everyone);
    check_collectives(t, seed);
    seed += 10;

    // A split of the split: every second member of it (a stride over a stride).
    {
      team sub = split_strided(w, t, 0, 2, (s.size + 1) / 2);
      std::vector<int> sub_members;
      for (int i = 0; i < s.size; i += 2) sub_members.push_back(members[i]);
      check_queries(sub, sub_members, t, members);
      check_collectives(sub, seed);
      seed += 10;
      sub.destroy();
    }
    t.destroy();
    EXPECT_FALSE(t.valid());
  }
}

// split_2d of the world in rows of xrange: x is this PE's row, y its column (the last row may be short).
TEST(CollTeams, Split2d) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const int n = w.n_pes();
  // Rows of 1 and 2 PEs (2 rows of 2 at 4 PEs, 4 rows of 2 at 8), of half the PEs from 6 up (2 rows of 4
  // at 8), of all of them, of more than all, and of one short of all (a last row shorter than the others).
  std::vector<int> xranges = {1, 2, n, n + 3};
  if (n >= 6 && n % 2 == 0) xranges.push_back(n / 2);
  if (n >= 3) xranges.push_back(n - 1);
  std::uint64_t seed = 400;
  for (int xrange : xranges) {
    SCOPED_TRACE("split_2d(xrange " + std::to_string(xrange) + ")");
    auto [x, y] = split_2d(w, world_team(w), xrange);
    const int row_length = std::min(xrange, n);
    const int row = w.pe() / row_length, column = w.pe() % row_length;
    std::vector<int> row_members, column_members;
    for (int pe = row * row_length; pe < std::min(n, (row + 1) * row_length); ++pe) row_members.push_back(pe);
    for (int pe = column; pe < n; pe += row_length) column_members.push_back(pe);
    check_queries(x, row_members, y, column_members);
    check_queries(y, column_members, world_team(w), all_pes(n));
    EXPECT_EQ(x.my_index(), column);
    EXPECT_EQ(y.my_index(), row);
    // Different rows run on different x teams at the same time, each with its own members.
    check_collectives(x, seed);
    check_collectives(y, seed + 10);
    seed += 20;
    // Destroyed in the same order on every PE (y, then x, as the pair goes out of scope).
  }
}

// A team of PE 0 alone: on the other PEs every collective call is refused. On PE 0 it works.
TEST(CollTeams, OutsidePeCallsThrow) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  team t = split_strided(w, world_team(w), 0, 1, 1);
  auto* buf = static_cast<float*>(w.malloc(64 * sizeof(float)));
  test_stream s;
  if (w.pe() != 0) {
    EXPECT_FALSE(t.member());
    EXPECT_EQ(t.my_index(), -1);
    EXPECT_EQ(t.device_handle().index, -1);
    EXPECT_THROW(reduce_on_stream(t, buf, buf + 32, 8, reduce_op::sum, s), shoal::error);
    EXPECT_THROW(reducescatter_on_stream(t, buf, buf + 32, 8, reduce_op::sum, s), shoal::error);
    EXPECT_THROW(broadcast_on_stream(t, buf, buf + 32, 8, 0, s), shoal::error);
    EXPECT_THROW(fcollect_on_stream(t, buf, buf + 32, 8, s), shoal::error);
    EXPECT_THROW(alltoall_on_stream(t, buf, buf + 32, 8, s), shoal::error);
    EXPECT_THROW(barrier_on_stream(t, s), shoal::error);
    EXPECT_THROW(sync_on_stream(t, s), shoal::error);
  } else {
    EXPECT_TRUE(t.member());
    std::vector<float> in = random_values<float>(77, 32);
    upload(buf + 32, std::vector<std::uint8_t>(reinterpret_cast<std::uint8_t*>(in.data()),
                                               reinterpret_cast<std::uint8_t*>(in.data() + 32)));
    reduce_on_stream(t, buf, buf + 32, 32, reduce_op::sum, s);
    barrier_on_stream(t, s);
    s.wait("reduce on a team of one");
    const std::vector<std::uint8_t> got = download(buf, 32 * sizeof(float));
    EXPECT_EQ(std::memcmp(got.data(), in.data(), got.size()), 0) << "a sum over one PE is a copy";
  }
  barrier_all(w);
  w.free(buf);
}

TEST(CollTeams, DestroyedTeamThrows) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  auto* buf = static_cast<float*>(w.malloc(64 * sizeof(float)));
  test_stream s;
  team t = split_strided(w, world_team(w), 0, 1, w.n_pes());
  ASSERT_TRUE(t.valid());
  t.destroy();
  EXPECT_FALSE(t.valid());
  EXPECT_FALSE(t.member());
  // Its queries report no members, as for a team never created (they used to answer with the old layout).
  EXPECT_EQ(t.size(), 0);
  EXPECT_EQ(t.pe_of(0), -1);
  EXPECT_EQ(t.translate(0, world_team(w)), -1);
  EXPECT_THROW(t.device_handle(), shoal::error);
  EXPECT_THROW(t.owner(), shoal::error);
  EXPECT_THROW(reduce_on_stream(t, buf, buf + 32, 8, reduce_op::sum, s), shoal::error);
  EXPECT_THROW(reducescatter_on_stream(t, buf, buf + 32, 1, reduce_op::max, s), shoal::error);
  EXPECT_THROW(broadcast_on_stream(t, buf, buf + 32, 8, 0, s), shoal::error);
  EXPECT_THROW(fcollect_on_stream(t, buf, buf + 32, 1, s), shoal::error);
  EXPECT_THROW(alltoall_on_stream(t, buf, buf + 32, 1, s), shoal::error);
  EXPECT_THROW(barrier_on_stream(t, s), shoal::error);
  EXPECT_THROW(sync_on_stream(t, s), shoal::error);
  EXPECT_THROW(split_strided(w, t, 0, 1, 1), shoal::error);  // every PE throws before allocating
  EXPECT_THROW(split_2d(w, t, 1), shoal::error);
  t.destroy();  // a second destroy does nothing

  team never_created;
  EXPECT_FALSE(never_created.valid());
  EXPECT_THROW(never_created.device_handle(), shoal::error);
  EXPECT_THROW(barrier_on_stream(never_created, s), shoal::error);
  s.wait("nothing was enqueued");
  w.free(buf);
}

TEST(CollTeams, SplitRejectsBadArguments) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const int n = w.n_pes();
  const std::uint64_t used = w.heap_usage().used;
  EXPECT_THROW(split_strided(w, world_team(w), 0, 1, n + 1), shoal::error);  // past the last member
  EXPECT_THROW(split_strided(w, world_team(w), n, 1, 1), shoal::error);
  EXPECT_THROW(split_strided(w, world_team(w), -1, 1, 1), shoal::error);
  EXPECT_THROW(split_strided(w, world_team(w), 0, 0, 1), shoal::error);
  EXPECT_THROW(split_strided(w, world_team(w), 0, 1, 0), shoal::error);
  EXPECT_THROW(split_2d(w, world_team(w), 0), shoal::error);
  EXPECT_THROW(split_2d(w, world_team(w), -2), shoal::error);
  // A bad xrange on the last PE alone: every PE fails (none waits for the others' vote).
  EXPECT_THROW(split_2d(w, world_team(w), w.pe() == n - 1 ? 0 : 1), shoal::error);
  EXPECT_EQ(w.heap_usage().used, used) << "a refused split left heap memory allocated";
  // The world team still works.
  run_stream_matrix<std::int32_t>(world_team(w), {.kinds = {coll_kind::reduce}, .counts = {37}}, 500);
}

// A SHOAL_ALGO_* value that names no algorithm of the collective is refused when the team is created,
// on every PE alike, and the refused team must not keep its heap state.
TEST(CollTeams, BadAlgorithmVariableIsRefused) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const std::uint64_t used = w.heap_usage().used;
  for (auto [name, value] : {std::pair{"SHOAL_ALGO_REDUCE", "bogus"}, std::pair{"SHOAL_ALGO_BARRIER", "ll"},
                             std::pair{"SHOAL_ALGO_BROADCAST", "two_shot"}}) {
    SCOPED_TRACE(std::string(name) + "=" + value);
    scoped_env env({{name, value}});
    try {
      team t = split_strided(w, world_team(w), 0, 1, w.n_pes());
      ADD_FAILURE() << "split_strided accepted the value";
    } catch (const shoal::error& e) {
      EXPECT_EQ(e.category(), errc::config) << e.what();
    }
  }
  EXPECT_EQ(w.heap_usage().used, used) << "a team refused at creation left its state allocated in the heap";
  team fine = split_strided(w, world_team(w), 0, 1, w.n_pes());
  run_stream_matrix<std::int32_t>(fine, {.kinds = {coll_kind::reduce, coll_kind::fcollect}, .counts = {37}}, 510);
}

// Collective settings that differ between PEs (here SHOAL_ALGO_FCOLLECT; in a job, a launcher that passes the
// environment only to the PEs of its own node): the members would run different algorithms in one call, one_shot
// against direct, each reading what the other never wrote, with no error. Team creation refuses the team on
// every PE alike, naming the first PE that differs, and keeps no heap state.
TEST(CollTeams, SettingsThatDifferBetweenPEsAreRefused) {
  SHOAL_REQUIRE_WORLD(2);
  world& w = *the_world();
  const std::uint64_t used = w.heap_usage().used;
  {
    scoped_env env({{"SHOAL_ALGO_FCOLLECT", w.pe() == 1 ? "direct" : "one_shot"}});
    try {
      team t = split_strided(w, world_team(w), 0, 1, w.n_pes());
      ADD_FAILURE() << "split_strided accepted SHOAL_ALGO_FCOLLECT=direct on PE 1 and one_shot elsewhere";
    } catch (const shoal::error& e) {
      EXPECT_EQ(e.category(), errc::config) << e.what();
      EXPECT_NE(std::string(e.what()).find("PE 1 "), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(w.heap_usage().used, used) << "a team refused at creation left its state allocated in the heap";
  team fine = split_strided(w, world_team(w), 0, 1, w.n_pes());
  run_stream_matrix<std::int32_t>(fine, {.kinds = {coll_kind::fcollect}, .counts = {37, 10000}}, 520);
}

}  // namespace
}  // namespace shoal::gpu_test
