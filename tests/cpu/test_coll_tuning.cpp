// What kernels read from the cost model: the size thresholds in a team handle must reproduce the model's
// choice (to the scan's resolution), SHOAL_ALGO_* overrides must force exactly their algorithm, and the
// handle's pick() must follow both. Also the team handle's channel views, and what the hierarchical
// all-reduce's choice compares, and which of its two kernels (LL, or the others) an on-stream call launches.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.hpp"
#include "coll/hierarchical.hpp"
#include "coll/stream_common.hpp"
#include "coll/tuning.hpp"
#include "shoal/error.hpp"
#include "shoal/team_handle.hpp"

namespace shoal::detail {
namespace {

const char* no_env(const char*) { return nullptr; }

// The large-message algorithm of each collective, as the device calls name it.
algorithm large_of(collective c) { return c == collective::reduce ? algorithm::two_shot : algorithm::direct; }

TEST(CollTuning, ThresholdsReproduceTheModelAtScannedSizes) {
  const coll_model_table table;
  // (A team of one PE is left out: with no peers the model's ll and one_shot costs cross back and forth
  // around multiples of chunk_bytes, which thresholds cannot follow; every algorithm is a local copy there.)
  for (int n : {2, 3, 4, 8}) {
    team_handle h;
    h.tuning = make_tuning(table, n, no_env);
    for (collective c : {collective::broadcast, collective::fcollect, collective::alltoall, collective::reduce,
                         collective::reducescatter}) {
      for (std::uint64_t bytes = 1; bytes <= (std::uint64_t{1} << 30); bytes *= 2) {
        const algorithm model = model_choice(table, c, n, bytes);
        EXPECT_EQ(h.pick(c, bytes, large_of(c)), model) << to_string(c) << " n=" << n << " bytes=" << bytes;
      }
    }
  }
}

// The default table's thresholds, as docs/collectives-model.md lists them ("The default choices"): fixed
// values, so a model that picked wrongly everywhere, which the test above would follow, fails here.
TEST(CollTuning, DefaultThresholdsAreTheDocumentedTable) {
  constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB;
  struct row {
    int n;
    collective c;
    std::uint64_t ll, one_shot;
  };
  const row rows[] = {
      {2, collective::broadcast, 384 * KiB, 2 * MiB},     {2, collective::fcollect, 384 * KiB, 2 * MiB},
      {2, collective::alltoall, 384 * KiB, 2 * MiB},      {2, collective::reduce, 384 * KiB, 2 * MiB},
      {2, collective::reducescatter, 384 * KiB, 2 * MiB}, {4, collective::broadcast, 128 * KiB, 2 * MiB},
      {4, collective::fcollect, 128 * KiB, 2 * MiB},      {4, collective::alltoall, 128 * KiB, 2 * MiB},
      {4, collective::reduce, 128 * KiB, 768 * KiB},      {4, collective::reducescatter, 128 * KiB, 2 * MiB},
      {8, collective::broadcast, 64 * KiB, 2 * MiB},      {8, collective::fcollect, 64 * KiB, 1 * MiB},
      {8, collective::alltoall, 64 * KiB, 1 * MiB},       {8, collective::reduce, 64 * KiB, 192 * KiB},
      {8, collective::reducescatter, 64 * KiB, 2 * MiB},
  };
  for (const row& r : rows) {
    const coll_tuning t = make_tuning(coll_model_table{}, r.n, no_env);
    EXPECT_EQ(t.ll_max_bytes[static_cast<int>(r.c)], r.ll) << to_string(r.c) << " on " << r.n << " PEs";
    EXPECT_EQ(t.one_shot_max_bytes[static_cast<int>(r.c)], r.one_shot) << to_string(r.c) << " on " << r.n << " PEs";
  }
}

TEST(CollTuning, OverrideForcesEverySize) {
  std::map<std::string, std::string> env{{"SHOAL_ALGO_REDUCE", " two_shot "}, {"SHOAL_ALGO_FCOLLECT", "auto"},
                                         {"SHOAL_ALGO_ALLTOALL", "   "}};
  auto getenv_fn = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  team_handle h;
  h.tuning = make_tuning(coll_model_table{}, 2, getenv_fn);
  for (std::uint64_t bytes : {1ull, 4096ull, 1ull << 30})
    EXPECT_EQ(h.pick(collective::reduce, bytes, algorithm::two_shot), algorithm::two_shot) << bytes;
  // "auto" and blanks leave the model in charge.
  EXPECT_EQ(h.tuning.forced[static_cast<int>(collective::fcollect)], -1);
  EXPECT_EQ(h.tuning.forced[static_cast<int>(collective::alltoall)], -1);
  EXPECT_EQ(h.pick(collective::alltoall, 8, algorithm::direct), algorithm::ll);
  // with_algorithm does on the device what the variable does for the whole team.
  EXPECT_EQ(h.with_algorithm(collective::alltoall, algorithm::direct).pick(collective::alltoall, 8, algorithm::direct),
            algorithm::direct);

  env["SHOAL_ALGO_BROADCAST"] = "two_shot";  // broadcast has no two_shot
  EXPECT_THROW(make_tuning(coll_model_table{}, 2, getenv_fn), shoal::error);
}

TEST(CollTuning, NetworkConstantsLeaveThresholdsAlone) {
  // The scale model's constants (docs/scale-model.md) must not move what kernels read.
  coll_model_table net;
  net.nic_gbps = 0.5;
  net.net_step_us = 50;
  net.net_post_us = 0;
  net.net_msg_us = 10;
  net.gpus_per_node = 1;
  net.nodes = 4096;
  for (int n : {2, 3, 4, 8, 16}) {
    const coll_tuning base = make_tuning(coll_model_table{}, n, no_env);
    const coll_tuning other = make_tuning(net, n, no_env);
    for (int c = 0; c < kCollectiveCount; ++c) {
      EXPECT_EQ(other.ll_max_bytes[c], base.ll_max_bytes[c]) << n << " " << c;
      EXPECT_EQ(other.one_shot_max_bytes[c], base.one_shot_max_bytes[c]) << n << " " << c;
      EXPECT_EQ(other.forced[c], base.forced[c]) << n << " " << c;
    }
  }
}

TEST(CollTuning, ChannelViews) {
  team_handle h;
  h.channel_first = 0;
  h.channel_count = 8;
  const team_handle view = h.channels(2, 3);
  EXPECT_EQ(view.channel_first, 2);
  EXPECT_EQ(view.channel_count, 3);
  EXPECT_EQ(view.channels(1, 2).channel_first, 3);   // relative to the view
  EXPECT_EQ(view.channels(2, 2).channel_count, 0);   // past the view's end: no channels
  EXPECT_EQ(h.channels(-1, 2).channel_count, 0);
  EXPECT_EQ(h.channels(0, 0).channel_count, 0);
  // first + count past INT_MAX: no channels, not a wrapped sum that passes the range check.
  EXPECT_EQ(h.channels(1, INT_MAX).channel_count, 0);
  EXPECT_EQ(h.channels(INT_MAX, 1).channel_count, 0);
  EXPECT_EQ(h.channels(INT_MAX, 1).channel_first, 0);
  EXPECT_EQ(view.channels(2, INT_MAX - 1).channel_count, 0);
}


// Team creation compares this digest across PEs and refuses the team where it differs, so it must change with
// everything that makes members choose differently, and with nothing else: unset, blank and "auto" are all the
// model's choice, and a value is read trimmed, as the model reads it.
TEST(CollTuning, SettingsDigestChangesWithWhatDecidesTheAlgorithm) {
  const coll_model_table table;
  constexpr std::uint64_t kCe = std::uint64_t{32} << 20, kChannels = 128, kScratch = 16384;
  const std::uint64_t base = collective_settings_digest(table, no_env, kCe, kChannels, kScratch, 0);
  std::map<std::string, std::string> env;
  auto getenv_fn = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  for (const char* model : {"auto", " auto ", "", "   "}) {
    env["SHOAL_ALGO_FCOLLECT"] = model;
    EXPECT_EQ(collective_settings_digest(table, getenv_fn, kCe, kChannels, kScratch, 0), base) << "'" << model << "'";
  }
  env["SHOAL_ALGO_FCOLLECT"] = "one_shot";
  const std::uint64_t forced = collective_settings_digest(table, getenv_fn, kCe, kChannels, kScratch, 0);
  EXPECT_NE(forced, base);
  env["SHOAL_ALGO_FCOLLECT"] = " one_shot\t";
  EXPECT_EQ(collective_settings_digest(table, getenv_fn, kCe, kChannels, kScratch, 0), forced);
  env["SHOAL_ALGO_FCOLLECT"] = "direct";
  EXPECT_NE(collective_settings_digest(table, getenv_fn, kCe, kChannels, kScratch, 0), forced);
  env = {{"SHOAL_ALGO_ALLTOALL", "one_shot"}};  // the same value for another collective
  EXPECT_NE(collective_settings_digest(table, getenv_fn, kCe, kChannels, kScratch, 0), forced);
  EXPECT_NE(collective_settings_digest(table, getenv_fn, kCe, kChannels, kScratch, 0), base);

  coll_model_table calibrated;
  calibrated.step_us = 4.5;
  EXPECT_NE(collective_settings_digest(calibrated, no_env, kCe, kChannels, kScratch, 0), base);
  EXPECT_NE(collective_settings_digest(table, no_env, 0, kChannels, kScratch, 0), base);
  EXPECT_NE(collective_settings_digest(table, no_env, kCe, 64, kScratch, 0), base);
  EXPECT_NE(collective_settings_digest(table, no_env, kCe, kChannels, 2 * kScratch, 0), base);
  // SHOAL_HIERARCHICAL_CHUNKS: PEs that cut the hierarchical all-reduce differently call the node and network
  // phases in different sequences and hang.
  EXPECT_NE(collective_settings_digest(table, no_env, kCe, kChannels, kScratch, 4), base);
}

// SHOAL_ALGO_REDUCE=hierarchical names the host's composition (coll/hierarchical.hpp), not a kernel: the
// kernels stay with the model, at every size, and the variable is accepted (not a config error).
TEST(CollTuning, HierarchicalLeavesTheKernelsToTheModel) {
  std::map<std::string, std::string> env{{"SHOAL_ALGO_REDUCE", "hierarchical"}};
  auto getenv_fn = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  const coll_model_table table;
  team_handle h;
  h.tuning = make_tuning(table, 4, getenv_fn);
  EXPECT_EQ(h.tuning.forced[static_cast<int>(collective::reduce)], -1);
  for (std::uint64_t bytes : {8ull, 1ull << 20, 1ull << 30})
    EXPECT_EQ(choose_algorithm(table, collective::reduce, 4, bytes, getenv_fn), model_choice(table, collective::reduce, 4, bytes));
  env = {{"SHOAL_ALGO_FCOLLECT", "hierarchical"}};  // only the all-reduce has it
  EXPECT_THROW(make_tuning(table, 4, getenv_fn), shoal::error);
}

// What the hierarchical choice compares: its best pipelined plan (two node launches and phases on one
// stream, a launch and a flat call between nodes on the other) against one flat call. On 2 nodes of 2 PEs a
// tiny call pays the extra launches and stays flat; from 1 MiB the network's halved share wins. On 16 nodes
// of 8 the network carries 1/8 of the data, and every size goes hierarchical.
TEST(CollTuning, HierarchicalWinsLargeAllReducesAcrossNodes) {
  const coll_model_table table;
  const node_shape small{.gpus_per_node = 2, .nodes = 2}, large{.gpus_per_node = 8, .nodes = 16};
  auto hierarchical_us = [&](node_shape shape, std::uint64_t bytes) {
    return plan_hierarchical_reduce(table, shape, bytes).us;
  };
  EXPECT_GT(hierarchical_us(small, 8), flat_reduce_us(table, small, 8));
  for (std::uint64_t bytes : {1ull << 20, 64ull << 20, 256ull << 20})
    EXPECT_LT(hierarchical_us(small, bytes), flat_reduce_us(table, small, bytes)) << bytes;
  for (std::uint64_t bytes : {8ull, 1ull << 20, 256ull << 20})
    EXPECT_LT(hierarchical_us(large, bytes), flat_reduce_us(table, large, bytes)) << bytes;
  EXPECT_LT(hierarchical_us(large, 1ull << 20), hierarchical_us(large, 64ull << 20));
}

// The plan pipelines only where the per-chunk launches pay for themselves: one chunk for a tiny call, several
// for a large one, never more than kMaxHierarchicalChunks. (The phases' formulas are checked against hand
// values in the scale model's tests.)
TEST(CollTuning, HierarchicalPlanPipelinesLargeCalls) {
  const coll_model_table table;
  const node_shape shape{.gpus_per_node = 2, .nodes = 2};
  EXPECT_EQ(plan_hierarchical_reduce(table, shape, 4096).chunks, 1);
  const hierarchical_plan large = plan_hierarchical_reduce(table, shape, 256ull << 20);
  EXPECT_GT(large.chunks, 1);
  EXPECT_LE(large.chunks, kMaxHierarchicalChunks);
}

// SHOAL_HIERARCHICAL_CHUNKS as init read it forces the chunk count; 0 is the plan's; no chunk is left without
// an element of each PE's share; out of range is a config error naming the variable. The environment of the
// moment plays no part: a PE that changed it on its own would cut the call differently from the others.
TEST(CollTuning, HierarchicalChunksFollowTheSettingReadAtInit) {
  const coll_model_table table;
  const node_shape shape{.gpus_per_node = 2, .nodes = 2};
  const std::uint64_t bytes = 256ull << 20;
  const int planned = plan_hierarchical_reduce(table, shape, bytes).chunks;
  EXPECT_EQ(hierarchical_chunks(table, shape, bytes, bytes / 8, 0), planned);
  EXPECT_EQ(hierarchical_chunks(table, shape, bytes, 3, 0), std::min(planned, 3));
  EXPECT_EQ(hierarchical_chunks(table, shape, 64, 8, 5), 5);
  EXPECT_EQ(hierarchical_chunks(table, shape, 64, 2, 5), 2);
  ::setenv("SHOAL_HIERARCHICAL_CHUNKS", "3", 1);
  EXPECT_EQ(hierarchical_chunks(table, shape, bytes, bytes / 8, 0), planned);
  EXPECT_EQ(hierarchical_chunks(table, shape, 64, 8, 5), 5);
  ::unsetenv("SHOAL_HIERARCHICAL_CHUNKS");
  for (const std::int64_t bad : {17, -1}) {
    try {
      hierarchical_chunks(table, shape, bytes, bytes / 8, bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const shoal::error& e) {
      EXPECT_NE(std::string(e.what()).find("SHOAL_HIERARCHICAL_CHUNKS"), std::string::npos) << e.what();
    }
  }
  // What init reads: the configuration table holds it to 0..16.
  for (const char* bad : {"17", "-1", "many"}) {
    const auto getenv_fn = [bad](const char* name) -> const char* {
      return std::string_view(name) == "SHOAL_HIERARCHICAL_CHUNKS" ? bad : nullptr;
    };
    try {
      config::load(getenv_fn);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const shoal::error& e) {
      EXPECT_NE(std::string(e.what()).find("SHOAL_HIERARCHICAL_CHUNKS"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(config::load([](const char* name) -> const char* {
              return std::string_view(name) == "SHOAL_HIERARCHICAL_CHUNKS" ? "7" : nullptr;
            }).hierarchical_chunks,
            7);
}

// On-stream calls give each CTA a few KiB within a node; across nodes every CTA's share costs proxy
// messages, so shares there are at least kProxiedShare: a 64 KiB all-reduce takes one CTA, 1 MiB two,
// and large calls still use every channel.
TEST(CollTuning, OnStreamCallsAcrossNodesUseLargeShares) {
  team_handle h;
  h.channel_count = 8;
  h.resident_ctas = 132;
  h.ll_bytes = 16 << 10;
  h.staged_bytes = 1 << 20;
  EXPECT_EQ(plan_launch(h, algorithm::one_shot, 64 << 10, 64 << 10).ctas, 8u);
  h.spans_nodes = 1;
  EXPECT_EQ(plan_launch(h, algorithm::one_shot, 64 << 10, 64 << 10).ctas, 1u);
  EXPECT_EQ(plan_launch(h, algorithm::one_shot, 1 << 20, 1 << 20).ctas, 2u);
  EXPECT_EQ(plan_launch(h, algorithm::one_shot, 16 << 20, 16 << 20).ctas, 8u);
  EXPECT_EQ(plan_launch(h, algorithm::direct, 8, 8 << 10).ctas, 1u);
}

// An on-stream LL launch gives each thread one 8-byte word of the largest CTA share, and a one_shot launch one
// 16-byte vector, in whole warps, from one warp up to kCollThreads (then threads take several); the other
// algorithms keep kCollThreads.
TEST(CollTuning, OnStreamLLAndOneShotLaunchesOneThreadPerUnit) {
  team_handle h;
  h.channel_count = 128;
  h.resident_ctas = 132;
  h.ll_bytes = h.staged_bytes = 16 << 10;
  auto ll = [&](std::uint64_t block_bytes) { return plan_launch(h, algorithm::ll, block_bytes, block_bytes); };
  EXPECT_EQ(ll(4).ctas, 1u);
  EXPECT_EQ(ll(4).threads, 32u);    // one word: one warp
  EXPECT_EQ(ll(4 << 10).ctas, 4u);  // 1 KiB per CTA
  EXPECT_EQ(ll(4 << 10).threads, 128u);
  EXPECT_EQ(ll(1000).threads, 128u);  // 1000 bytes, one CTA: 125 words, four warps
  EXPECT_EQ(ll(64 << 10).ctas, 64u);
  EXPECT_EQ(ll(64 << 10).threads, 128u);
  h.channel_count = 2;  // capped: 32 KiB per CTA, 4096 words, several per thread
  EXPECT_EQ(ll(64 << 10).ctas, 2u);
  EXPECT_EQ(ll(64 << 10).threads, kCollThreads);
  EXPECT_EQ(ll(5 << 10).threads, 320u);  // 2.5 KiB per CTA: 320 words
  auto one_shot = [&](std::uint64_t block_bytes) {
    return plan_launch(h, algorithm::one_shot, block_bytes, block_bytes);
  };
  EXPECT_EQ(one_shot(4 << 10).ctas, 1u);  // 4 KiB per CTA: 256 vectors
  EXPECT_EQ(one_shot(4 << 10).threads, 256u);
  EXPECT_EQ(one_shot(100).threads, 32u);   // 7 vectors: one warp
  EXPECT_EQ(one_shot(64 << 10).ctas, 2u);  // capped: 32 KiB per CTA, several vectors per thread
  EXPECT_EQ(one_shot(64 << 10).threads, kCollThreads);
  h.channel_count = 128;
  EXPECT_EQ(one_shot(64 << 10).ctas, 16u);  // 4 KiB per CTA
  EXPECT_EQ(one_shot(64 << 10).threads, 256u);
  EXPECT_EQ(one_shot(1 << 20).ctas, 128u);  // 8 KiB per CTA: 512 vectors
  EXPECT_EQ(one_shot(1 << 20).threads, kCollThreads);
  EXPECT_EQ(plan_launch(h, algorithm::two_shot, 4 << 10, 4 << 10).threads, kCollThreads);
}

// What a device call runs, from a hand-made table: the pick by the call's size, except that a unit (one CTA,
// or a block) whose share needs more than four steps of LL (8 KiB of payload each here) or one-shot (16 KiB
// each) runs the large algorithm; a forced algorithm and a team across nodes keep the pick.
TEST(CollTuning, PickForUnitFallsBackWhereTheUnitsShareIsTooLarge) {
  team_handle h;
  h.ll_bytes = h.staged_bytes = 16 << 10;
  for (int c = 0; c < kCollectiveCount; ++c) h.tuning.forced[c] = -1;
  for (collective c : {collective::reduce, collective::alltoall}) {
    h.tuning.ll_max_bytes[static_cast<int>(c)] = 64 << 10;
    h.tuning.one_shot_max_bytes[static_cast<int>(c)] = 1 << 20;
  }
  const auto unit_runs = [&](const team_handle& t, collective c, std::uint64_t bytes, std::uint64_t unit_bytes) {
    return t.pick_for_unit(c, bytes, unit_bytes, c == collective::reduce ? algorithm::two_shot : algorithm::direct);
  };
  const collective r = collective::reduce, a = collective::alltoall;
  EXPECT_EQ(unit_runs(h, r, 4 << 10, 4 << 10), algorithm::ll);
  EXPECT_EQ(unit_runs(h, r, 64 << 10, 32 << 10), algorithm::ll);               // four LL steps
  EXPECT_EQ(unit_runs(h, r, 64 << 10, (32 << 10) + 16), algorithm::two_shot);  // a fifth
  EXPECT_EQ(unit_runs(h, r, (64 << 10) + 16, 64 << 10), algorithm::one_shot);  // four one-shot steps
  EXPECT_EQ(unit_runs(h, r, (64 << 10) + 16, (64 << 10) + 16), algorithm::two_shot);
  EXPECT_EQ(unit_runs(h, r, (1 << 20) + 16, 16), algorithm::two_shot);  // past the one-shot threshold
  EXPECT_EQ(unit_runs(h, a, 64 << 10, (32 << 10) + 16), algorithm::direct);
  EXPECT_EQ(unit_runs(h, a, 1 << 20, 64 << 10), algorithm::one_shot);

  const team_handle forced = h.with_algorithm(r, algorithm::ll);
  EXPECT_EQ(unit_runs(forced, r, std::uint64_t{1} << 30, std::uint64_t{1} << 30), algorithm::ll);
  EXPECT_EQ(unit_runs(forced, a, 64 << 10, (32 << 10) + 16), algorithm::direct) << "forced for reduce only";

  team_handle across = h;  // only puts and signals: reductions staged, exchanges staged or pushed
  across.spans_nodes = 1;
  EXPECT_EQ(unit_runs(across, r, 4 << 10, 4 << 10), algorithm::one_shot);
  EXPECT_EQ(unit_runs(across, r, std::uint64_t{1} << 30, std::uint64_t{1} << 30), algorithm::one_shot);
  EXPECT_EQ(unit_runs(across, a, 4 << 10, 1 << 20), algorithm::one_shot);  // LL's size, staged, any share
  EXPECT_EQ(unit_runs(across, a, std::uint64_t{1} << 30, 16), algorithm::direct);
}

// An on-stream call runs its LL kernel only where the device's pick_for_unit keeps LL for every CTA: a
// share of at most four LL steps (2 x ll_bytes), any share when LL is forced, never for other picks.
TEST(CollTuning, OnStreamLLKernelOnlyWhereEveryCTAKeepsLL) {
  team_handle h;
  h.channel_count = 4;
  h.resident_ctas = 132;
  h.ll_bytes = h.staged_bytes = 16 << 10;  // 8 KiB of payload per LL step: LL kept up to 32 KiB per CTA
  const collective c = collective::reduce;
  EXPECT_TRUE(h.keeps_algorithm(c, algorithm::ll, 32 << 10));
  EXPECT_FALSE(h.keeps_algorithm(c, algorithm::ll, (32 << 10) + 16));
  EXPECT_TRUE(h.keeps_algorithm(c, algorithm::one_shot, 64 << 10));
  EXPECT_FALSE(h.keeps_algorithm(c, algorithm::one_shot, (64 << 10) + 16));
  EXPECT_TRUE(h.keeps_algorithm(c, algorithm::two_shot, std::uint64_t{1} << 40));

  EXPECT_TRUE(runs_ll_kernel(h, c, algorithm::ll, 4 << 10, {4, 512}));
  EXPECT_TRUE(runs_ll_kernel(h, c, algorithm::ll, 128 << 10, {4, 512}));         // 32 KiB per CTA
  EXPECT_FALSE(runs_ll_kernel(h, c, algorithm::ll, (128 << 10) + 1, {4, 512}));  // one CTA takes 16 B more
  EXPECT_FALSE(runs_ll_kernel(h, c, algorithm::one_shot, 4 << 10, {4, 512}));
  EXPECT_TRUE(runs_ll_kernel(h.with_algorithm(c, algorithm::ll), c, algorithm::ll, 64 << 20, {4, 512}));
}

}  // namespace
}  // namespace shoal::detail
