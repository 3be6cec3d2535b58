// The collective cost model: formulas against values worked out by hand, the shape of the default
// table's choices across sizes, SHOAL_ALGO_* overrides and the table file format.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "coll/cost_model.hpp"
#include "shoal/coll_model.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

constexpr collective kAll[] = {collective::barrier,  collective::broadcast, collective::fcollect,
                               collective::alltoall, collective::reduce,    collective::reducescatter};

// Round constants: 1 GB/s is 1000 bytes per microsecond.
constexpr coll_model_table kRound{.launch_us = 4,
                                  .step_us = 1,
                                  .ll_step_us = 0.5,
                                  .link_gbps = 1,
                                  .ll_link_gbps = 0.5,
                                  .local_gbps = 10,
                                  .chunk_bytes = 1000};

TEST(CostModel, FormulasMatchHandValues) {
  // all-reduce, 4 PEs, 1000 bytes.
  // one_shot: 1 step (1000 B fit one chunk) + 3 x 1000 B / 1000 B/us + (4 + 1) x 1000 B / 10000 B/us
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::reduce, algorithm::one_shot, 4, 1000), 4.5);
  // two_shot: 2 steps + 2 x 3/4 x 1000 / 1000 + 5/4 x 1000 / 10000 = 2 + 1.5 + 0.125
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::reduce, algorithm::two_shot, 4, 1000), 3.625);
  // ll: an LL step carries half a chunk (500 B), so 2 steps: 2 x 0.5 + 2 x 3 x 1000 / 500 + 8 x 1000 / 10000
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::reduce, algorithm::ll, 4, 1000), 13.8);
  // one_shot is staged through scratch: one step per chunk_bytes, so 2500 bytes take 3 steps.
  // 3 + 3 x 2500 / 1000 + 5 x 2500 / 10000 = 3 + 7.5 + 1.25
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::reduce, algorithm::one_shot, 4, 2500), 11.75);
  // An LL step carries half a chunk: 1200 bytes take 3 steps. 1.5 + 2 x 3 x 1200 / 500 + 8 x 1200 / 10000
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::reduce, algorithm::ll, 4, 1200), 1.5 + 14.4 + 0.96);
  // broadcast direct, 2 PEs, 2000 bytes: 2 meetings + 2000 / 1000
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::broadcast, algorithm::direct, 2, 2000), 4);
  // alltoall one_shot, 8 PEs, 100-byte blocks: 1 + 700 / 1000 + (200 + 1400) / 10000
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::alltoall, algorithm::one_shot, 8, 100), 1.86);
  // reducescatter direct, 3 PEs, 5000-byte blocks: 2 + 10000 / 1000 + 10000 / 10000 (the peers' blocks are
  // read over the links; only the own block's read and the result's write are local)
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::reducescatter, algorithm::direct, 3, 5000), 13);
  // A barrier is one signalled step whatever the size.
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::barrier, algorithm::one_shot, 8, 1 << 20), 1);
}

TEST(CostModel, UnsupportedAlgorithmsNeverWin) {
  EXPECT_FALSE(supports(collective::barrier, algorithm::ll));
  EXPECT_FALSE(supports(collective::alltoall, algorithm::two_shot));
  EXPECT_FALSE(supports(collective::alltoall, algorithm::ring));
  EXPECT_FALSE(supports(collective::fcollect, algorithm::ring));
  EXPECT_FALSE(supports(collective::reduce, algorithm::direct));
  EXPECT_TRUE(supports(collective::fcollect, algorithm::direct));
  EXPECT_TRUE(supports(collective::reduce, algorithm::two_shot));
  for (collective op : kAll) {
    EXPECT_FALSE(supports(op, algorithm::hierarchical));
    EXPECT_EQ(predict_us(kRound, op, algorithm::hierarchical, 4, 64), std::numeric_limits<double>::infinity());
    for (int n : {1, 2, 8}) EXPECT_TRUE(supports(op, model_choice(coll_model_table{}, op, n, 4096)));
  }
}

// Size classes in the order the algorithms suit growing messages; two_shot and direct are the large ones.
int size_class(algorithm a) {
  switch (a) {
    case algorithm::ll:
      return 0;
    case algorithm::one_shot:
      return 1;
    default:
      return 2;
  }
}

std::vector<std::uint64_t> sizes() {
  std::vector<std::uint64_t> out{0};
  for (std::uint64_t b = 1; b <= (1ull << 30); b *= 2) {
    out.push_back(b);
    out.push_back(b + b / 2);
  }
  return out;
}

TEST(CostModel, DefaultChoiceGrowsWithSize) {
  const coll_model_table table;
  for (collective op : kAll) {
    for (int n : {2, 3, 4, 6, 8, 16}) {
      int last = 0;
      for (std::uint64_t bytes : sizes()) {
        const int now = size_class(model_choice(table, op, n, bytes));
        EXPECT_GE(now, last) << to_string(op) << " n=" << n << " bytes=" << bytes;
        last = now;
      }
    }
  }
}

TEST(CostModel, DefaultAllReduceRegimes) {
  const coll_model_table table;
  for (int n : {2, 4, 8}) {
    EXPECT_EQ(model_choice(table, collective::reduce, n, 8), algorithm::ll) << n;
    EXPECT_EQ(model_choice(table, collective::reduce, n, 1024), algorithm::ll) << n;
    EXPECT_EQ(model_choice(table, collective::reduce, n, 1ull << 30), algorithm::two_shot) << n;
  }
  // On 2 PEs, where forced algorithms cross on 2 x H200 (docs/collectives-model.md): ll at 256 KiB,
  // one_shot at 1 MiB, two_shot from a few MiB.
  EXPECT_EQ(model_choice(table, collective::reduce, 2, 256 << 10), algorithm::ll);
  EXPECT_EQ(model_choice(table, collective::reduce, 2, 1 << 20), algorithm::one_shot);
  EXPECT_EQ(model_choice(table, collective::reduce, 2, 64 << 20), algorithm::two_shot);
  // On 8 PEs every regime appears.
  std::map<algorithm, int> seen;
  for (std::uint64_t bytes : sizes()) ++seen[model_choice(table, collective::reduce, 8, bytes)];
  for (algorithm a : {algorithm::ll, algorithm::one_shot, algorithm::two_shot}) EXPECT_GT(seen[a], 0) << to_string(a);
  // The predictions are those of the measured calls (within their spread), not of the targets: on a
  // stream, 256 KiB ll measured 5.4 us and 1 MiB one_shot 9.5 us with a 3.9 us launch floor.
  EXPECT_NEAR(table.launch_us + predict_us(table, collective::reduce, algorithm::ll, 2, 256 << 10), 5.4, 3.0);
  EXPECT_NEAR(table.launch_us + predict_us(table, collective::reduce, algorithm::one_shot, 2, 1 << 20), 9.5, 3.0);
}

const char* no_env(const char*) { return nullptr; }

TEST(CostModel, OverrideForcesTheAlgorithm) {
  const coll_model_table table;
  EXPECT_EQ(algo_variable(collective::reducescatter), "SHOAL_ALGO_REDUCESCATTER");
  EXPECT_EQ(choose_algorithm(table, collective::reduce, 2, 64, no_env), algorithm::ll);
  EXPECT_EQ(choose_algorithm(table, collective::reduce, 2, 64, {}), algorithm::ll);
  std::map<std::string, std::string> env{{"SHOAL_ALGO_REDUCE", "two_shot"}, {"SHOAL_ALGO_BROADCAST", "auto"}};
  auto getenv_fn = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  for (std::uint64_t bytes : {0ull, 64ull, 1ull << 30})
    EXPECT_EQ(choose_algorithm(table, collective::reduce, 2, bytes, getenv_fn), algorithm::two_shot);
  EXPECT_EQ(choose_algorithm(table, collective::broadcast, 2, 64, getenv_fn), algorithm::ll);
  EXPECT_EQ(choose_algorithm(table, collective::alltoall, 2, 64, getenv_fn), algorithm::ll);  // unset

  // Bad values name the variable, the value and what is accepted for that collective.
  for (auto [var, value, hint] : {std::tuple{"SHOAL_ALGO_REDUCE", "fast", "auto,ll,one_shot,two_shot"},
                                  std::tuple{"SHOAL_ALGO_ALLTOALL", "two_shot", "auto,ll,one_shot,direct"},
                                  std::tuple{"SHOAL_ALGO_BARRIER", "hierarchical", "auto,one_shot"}}) {
    env = {{var, value}};
    const collective op = var == std::string("SHOAL_ALGO_REDUCE")     ? collective::reduce
                          : var == std::string("SHOAL_ALGO_ALLTOALL") ? collective::alltoall
                                                                      : collective::barrier;
    try {
      choose_algorithm(table, op, 2, 64, getenv_fn);
      ADD_FAILURE() << var << "=" << value << " was accepted";
    } catch (const shoal::error& e) {
      EXPECT_EQ(e.category(), errc::config);
      const std::string what = e.what();
      EXPECT_NE(what.find(var), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("'") + value + "'"), std::string::npos) << what;
      EXPECT_NE(what.find(hint), std::string::npos) << what;
    }
  }
}

TEST(CostModel, TableFileParses) {
  const coll_model_table t = parse_coll_model(
      "# calibrated on a test box\n"
      "\n"
      "link_gbps = 300.5   # SM copies\n"
      "  step_us=0.75\r\n"
      "chunk_bytes = 1e6\n"
      "launch_us = 0\n",
      "test.model");
  EXPECT_DOUBLE_EQ(t.link_gbps, 300.5);
  EXPECT_DOUBLE_EQ(t.step_us, 0.75);
  EXPECT_DOUBLE_EQ(t.chunk_bytes, 1e6);
  EXPECT_DOUBLE_EQ(t.launch_us, 0);
  EXPECT_DOUBLE_EQ(t.ll_step_us, coll_model_table{}.ll_step_us);  // left out: default
  EXPECT_DOUBLE_EQ(parse_coll_model("", "empty").local_gbps, coll_model_table{}.local_gbps);

  // format -> parse reproduces every value.
  const coll_model_table back = parse_coll_model(format_coll_model(kRound), "round");
  for (const auto& key : kCollModelKeys) EXPECT_DOUBLE_EQ(back.*key.field, kRound.*key.field) << key.name;
}

TEST(CostModel, TableFileErrorsNameTheLine) {
  const std::pair<const char*, const char*> bad[] = {
      {"step_us = 1\nlink_speed = 3\n", "unknown key 'link_speed'"},
      {"# ok\nstep_us 1\n", "not 'key = value'"},
      {"\n\nlink_gbps = fast\n", "'fast' is not a number for link_gbps"},
      {"link_gbps = 3x\n", "'3x' is not a number"},
      {"link_gbps =\n", "is not a number"},
      {"link_gbps = inf\n", "is not a number"},
      {"link_gbps = 0\n", "must be > 0"},
      {"step_us = -1\n", "must be >= 0"},
      {"step_us = 1\nstep_us = 2\n", "set twice"},
      {"chunk_bytes = 1e-300\n", "must be a whole number of bytes from 64"},
      {"\nchunk_bytes = 4096.5\n", "must be a whole number of bytes from 64"},
  };
  const int line_of[] = {2, 2, 3, 1, 1, 1, 1, 1, 2, 1, 2};
  for (std::size_t i = 0; i < std::size(bad); ++i) {
    try {
      parse_coll_model(bad[i].first, "calib.model");
      ADD_FAILURE() << bad[i].first << " was accepted";
    } catch (const shoal::error& e) {
      EXPECT_EQ(e.category(), errc::config);
      const std::string what = e.what();
      EXPECT_NE(what.find(fmt::format("calib.model:{}:", line_of[i])), std::string::npos) << what;
      EXPECT_NE(what.find(bad[i].second), std::string::npos) << what;
    }
  }
}

TEST(CostModel, MissingFileIsAConfigError) {
  EXPECT_THROW(load_coll_model("/nonexistent/shoal-coll.model"), shoal::error);
}

// A directory opens as a stream and reads as nothing: it must not pass as an empty table (the defaults).
TEST(CostModel, DirectoryIsAConfigError) {
  try {
    load_coll_model(::testing::TempDir());
    ADD_FAILURE() << "a directory was read as a table";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.category(), errc::config);
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

// Each count may be up to kMaxShapeCount, their product (the PEs of the shape, an int) too.
TEST(CostModel, NodeShapeProductIsBounded) {
  EXPECT_NO_THROW(parse_coll_model("gpus_per_node = 1024\nnodes = 1024\n", "shape"));
  try {
    parse_coll_model("gpus_per_node = 1048576\nnodes = 2\n", "shape");
    ADD_FAILURE() << "a shape of 2^21 PEs was accepted";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.category(), errc::config);
    EXPECT_NE(std::string(e.what()).find("1048576 x 2 is more than"), std::string::npos) << e.what();
  }
}

// Staged steps round up, and a step count too large for any integer type stays a (huge) double.
TEST(CostModel, StagedStepsRoundUpWithoutOverflow) {
  coll_model_table table;
  table.chunk_bytes = 1000;
  cost_terms terms;
  terms.staged = true;
  terms.steps = 1;
  for (const auto& [stage, want] : {std::pair{0.0, 1.0}, {1.0, 1.0}, {1000.0, 1.0}, {1001.0, 2.0}, {5500.0, 6.0}}) {
    terms.stage_bytes = stage;
    EXPECT_DOUBLE_EQ(steps_of(table, terms), want) << stage;
  }
  terms.ll = true;  // LL steps carry half a chunk
  terms.stage_bytes = 1001;
  EXPECT_DOUBLE_EQ(steps_of(table, terms), 3.0);
  table.chunk_bytes = 1e-300;  // only a table built in code can hold this: the parser refuses it
  terms.ll = false;
  terms.stage_bytes = 1e6;
  EXPECT_GT(steps_of(table, terms), 1e300);
}

// ---- Across nodes: the scale model (predict_net) and the network keys of table files ----

// kRound with round network constants: alpha_net = 1 + 2 = 3 us, the NIC 1000 bytes/us, 0.5 us a message.
constexpr coll_model_table kRoundNet{.launch_us = 4,
                                     .step_us = 1,
                                     .ll_step_us = 0.5,
                                     .link_gbps = 1,
                                     .ll_link_gbps = 0.5,
                                     .local_gbps = 10,
                                     .chunk_bytes = 1000,
                                     .nic_gbps = 1,
                                     .net_step_us = 2,
                                     .net_post_us = 1,
                                     .net_msg_us = 0.5};

constexpr node_shape kShapes[] = {{8, 2}, {8, 16}, {8, 128}, {4, 3}, {1, 5}};

TEST(ScaleModel, NetworkFormulasMatchHandValues) {
  // Flat one_shot all-reduce, 2 nodes of 2, 1000 bytes: one network step (3) + of 3000 remote bytes 2000 cross
  // the NIC (2 us; 2 messages: 1 us) while 1000 cross NVLink (1 us) + (4 + 1) x 1000 / 10000 local.
  EXPECT_DOUBLE_EQ(predict_net(kRoundNet, collective::reduce, algorithm::one_shot, {2, 2}, 1000).us, 5.5);
  // Flat direct alltoall: 2 network steps + max(NVLink 1, NIC max(2000 B: 2, 4 messages: 2)) + 2000 / 10000.
  EXPECT_DOUBLE_EQ(predict_net(kRoundNet, collective::alltoall, algorithm::direct, {2, 2}, 1000).us, 8.2);
  // Flat barrier on 3 nodes of 2: one network step + 4 messages off the node x 0.5.
  EXPECT_DOUBLE_EQ(predict_net(kRoundNet, collective::barrier, algorithm::one_shot, {2, 3}, 0).us, 5);
  // Rail-aligned ring, 4 PEs: 6 network steps + max(NVLink 750 / 1000, NIC max(750 B, 6 messages: 3)) + 3 x 3/4 x
  // 1000 / 10000 local.
  EXPECT_DOUBLE_EQ(predict_net(kRoundNet, collective::reduce, algorithm::ring, {2, 2}, 1000).us, 21.225);

  // Between nodes, 1000 bytes on 4 nodes: wait = steps x 3, busy = NIC max(bytes, messages x 0.5) + 3 x reduced /
  // 10000.
  using net_model_detail::between_nodes;
  EXPECT_DOUBLE_EQ(between_nodes(kRoundNet, net_algorithm::ring, 4, 1000).wait, 18);
  EXPECT_DOUBLE_EQ(between_nodes(kRoundNet, net_algorithm::ring, 4, 1000).busy, 3 + 0.225);
  EXPECT_DOUBLE_EQ(between_nodes(kRoundNet, net_algorithm::recursive_doubling, 4, 1000).wait, 6);
  EXPECT_DOUBLE_EQ(between_nodes(kRoundNet, net_algorithm::recursive_doubling, 4, 1000).busy, 2 + 0.6);
  EXPECT_DOUBLE_EQ(between_nodes(kRoundNet, net_algorithm::halving_doubling, 4, 1000).wait, 12);
  EXPECT_DOUBLE_EQ(between_nodes(kRoundNet, net_algorithm::halving_doubling, 4, 1000).busy, 2 + 0.225);
  // 6 nodes is not a power of two: recursive doubling on 4 plus a step in and a step out (4 steps, 4000 bytes).
  EXPECT_DOUBLE_EQ(between_nodes(kRoundNet, net_algorithm::recursive_doubling, 6, 1000).wait, 12);
  EXPECT_DOUBLE_EQ(between_nodes(kRoundNet, net_algorithm::recursive_doubling, 6, 1000).busy, 4 + 0.9);

  // Hierarchical all-reduce of 8 bytes on 2 nodes of 2, one chunk: ll reduce-scatter of 4-byte blocks
  // (0.5 + 8 / 500 + 16 / 10000) + recursive doubling (3 + max(0.004, 0.5) + 12 / 10000) + ll all-gather
  // (0.5 + 8 / 500 + 20 / 10000).
  const net_prediction h = predict_net(kRoundNet, collective::reduce, algorithm::hierarchical, {2, 2}, 8);
  EXPECT_EQ(h.algo, algorithm::hierarchical);
  EXPECT_EQ(h.between, net_algorithm::recursive_doubling);
  EXPECT_EQ(h.chunks, 1);
  EXPECT_NEAR(h.us, 0.5176 + 3.5012 + 0.518, 1e-12);
  // Hierarchical alltoall, 8-byte blocks: an ll alltoall of 16-byte blocks within the node (0.5 + 32 / 500 +
  // 80 / 10000), then one network step with one 16-byte message (3 + max(0.016, 0.5)).
  const net_prediction a = predict_net(kRoundNet, collective::alltoall, algorithm::hierarchical, {2, 2}, 8);
  EXPECT_EQ(a.chunks, 1);
  EXPECT_NEAR(a.us, 0.572 + 3.5, 1e-12);
}

TEST(ScaleModel, OneNodeIsTheWithinNodeModel) {
  for (const coll_model_table& table : {coll_model_table{}, kRound, kRoundNet}) {
    for (collective op : kAll) {
      for (int m : {1, 2, 4, 8}) {
        for (std::uint64_t bytes : sizes()) {
          for (int i = 0; i < kAlgorithmCount; ++i) {
            const auto algo = static_cast<algorithm>(i);
            EXPECT_EQ(predict_net(table, op, algo, {m, 1}, bytes).us, predict_us(table, op, algo, m, bytes));
            EXPECT_EQ(modelled(op, algo, {m, 1}), supports(op, algo));
          }
          const net_prediction choice = net_model_choice(table, op, {m, 1}, bytes);
          EXPECT_EQ(choice.algo, model_choice(table, op, m, bytes)) << to_string(op) << " m=" << m << " " << bytes;
          EXPECT_EQ(choice.us, predict_us(table, op, choice.algo, m, bytes));
        }
      }
    }
  }
}

TEST(ScaleModel, ModelledIsNotImplemented) {
  const node_shape two_nodes{8, 2};
  EXPECT_TRUE(modelled(collective::reduce, algorithm::hierarchical, two_nodes));
  EXPECT_TRUE(modelled(collective::alltoall, algorithm::hierarchical, two_nodes));
  EXPECT_TRUE(modelled(collective::reduce, algorithm::ring, two_nodes));
  EXPECT_TRUE(modelled(collective::reduce, algorithm::two_shot, two_nodes));
  EXPECT_FALSE(modelled(collective::reduce, algorithm::ll, two_nodes));  // not across the network
  EXPECT_FALSE(modelled(collective::alltoall, algorithm::two_shot, two_nodes));
  EXPECT_FALSE(modelled(collective::broadcast, algorithm::hierarchical, two_nodes));
  for (collective op : kAll) {
    EXPECT_FALSE(supports(op, algorithm::hierarchical));
    EXPECT_FALSE(supports(op, algorithm::ring));
    for (int i = 0; i < kAlgorithmCount; ++i) {
      const auto algo = static_cast<algorithm>(i);
      // What is not modelled is never predicted, and never chosen.
      if (!modelled(op, algo, two_nodes)) {
        EXPECT_EQ(predict_net(coll_model_table{}, op, algo, two_nodes, 4096).us,
                  std::numeric_limits<double>::infinity());
      }
    }
  }
  // The network constants never reach the runtime's choice: a table with other ones picks the same within a
  // node, and never an algorithm shoal cannot run.
  coll_model_table other;
  other.nic_gbps = 1;
  other.net_step_us = 100;
  other.net_post_us = 0;
  other.net_msg_us = 50;
  other.gpus_per_node = 2;
  other.nodes = 1000;
  for (collective op : kAll) {
    for (int n : {2, 8, 16, 1024}) {
      for (std::uint64_t bytes : sizes()) {
        const algorithm a = model_choice(other, op, n, bytes);
        EXPECT_EQ(a, model_choice(coll_model_table{}, op, n, bytes));
        EXPECT_TRUE(supports(op, a));
        EXPECT_EQ(predict_us(other, op, a, n, bytes), predict_us(coll_model_table{}, op, a, n, bytes));
      }
    }
  }
}

TEST(ScaleModel, MonotoneInSize) {
  for (const coll_model_table& table : {coll_model_table{}, gpu_initiated_network(coll_model_table{}), kRoundNet}) {
    for (node_shape shape : kShapes) {
      for (collective op : kAll) {
        for (int i = -1; i < kAlgorithmCount; ++i) {  // -1: the choice
          double last = 0;
          for (std::uint64_t bytes : sizes()) {
            const double us = i < 0 ? net_model_choice(table, op, shape, bytes).us
                                    : predict_net(table, op, static_cast<algorithm>(i), shape, bytes).us;
            EXPECT_GE(us, last) << to_string(op) << " algo " << i << " " << shape.gpus_per_node << "x" << shape.nodes
                                << " bytes=" << bytes;
            last = us;
          }
        }
      }
    }
  }
}

TEST(ScaleModel, LargeMessagesApproachTheNicBound) {
  const coll_model_table table;
  const double nic = table.nic_gbps;
  for (int k : {2, 16, 128}) {
    const node_shape shape{8, k};
    const int n = shape.n_pes();
    const double m = shape.gpus_per_node;
    // Hierarchical all-reduce sends 2(k-1)/k of each PE's 1/m over its NIC: bus bandwidth at most
    // m x nic x (n-1)k / (n(k-1)). It climbs towards that bound as the buffer grows and, where NVLink is not
    // the tighter limit (16 and 128 nodes), gets within 10% of it.
    const double nic_bound = m * nic * (n - 1.0) * k / (n * (k - 1.0));
    double last_bus = 0;
    for (std::uint64_t bytes : {1ull << 30, 1ull << 32, 1ull << 34}) {
      const net_prediction p = net_model_choice(table, collective::reduce, shape, bytes);
      EXPECT_EQ(p.algo, algorithm::hierarchical) << k;
      const double bus = bus_gbps(collective::reduce, n, bytes, p.us);
      EXPECT_LE(bus, nic_bound) << k;
      EXPECT_GE(bus, last_bus) << k << " nodes, " << bytes << " bytes";
      last_bus = bus;
      if (k > 2 && bytes == (1ull << 34)) {
        EXPECT_GE(bus, 0.9 * nic_bound) << k << " nodes, " << bytes << " bytes";
      }
      // Flat algorithms send every byte for other nodes over the NIC: at most nic x (n-1)/(n-m) bus bandwidth.
      for (algorithm flat : {algorithm::one_shot, algorithm::two_shot}) {
        const double flat_bus =
            bus_gbps(collective::reduce, n, bytes, predict_net(table, collective::reduce, flat, shape, bytes).us);
        EXPECT_LE(flat_bus, nic * (n - 1.0) / (n - m)) << k;
      }
    }
    // Alltoall cannot save bytes: (n - m) of each PE's n blocks cross its NIC, flat or hierarchical.
    const double a2a_bound = nic * (n - 1.0) / (n - m);
    const std::uint64_t block = 64ull << 20;
    const net_prediction a = net_model_choice(table, collective::alltoall, shape, block);
    const double a2a_bus = bus_gbps(collective::alltoall, n, block, a.us);
    EXPECT_LE(a2a_bus, a2a_bound) << k;
    EXPECT_GE(a2a_bus, 0.95 * a2a_bound) << k;
  }
}

TEST(ScaleModel, ChoiceMovesToBandwidthAlgorithmsAsSizeGrows) {
  // Through the proxy: hierarchical at every size on 8-GPU nodes, its part between nodes moving from
  // recursive doubling (fewest steps) to halving-doubling (fewest bytes), never back.
  const coll_model_table proxy;
  for (int k : {16, 128}) {
    const node_shape shape{8, k};
    EXPECT_EQ(net_model_choice(proxy, collective::reduce, shape, 8).between, net_algorithm::recursive_doubling);
    EXPECT_EQ(net_model_choice(proxy, collective::reduce, shape, 1ull << 30).between, net_algorithm::halving_doubling);
    bool bandwidth = false;
    for (std::uint64_t bytes : sizes()) {
      const net_prediction p = net_model_choice(proxy, collective::reduce, shape, bytes);
      EXPECT_EQ(p.algo, algorithm::hierarchical) << bytes;
      bandwidth = bandwidth || p.between == net_algorithm::halving_doubling;
      if (bandwidth) {
        EXPECT_EQ(p.between, net_algorithm::halving_doubling) << k << " nodes, " << bytes;
      }
    }
  }
  // With the NIC driven from the GPU a message costs little, and the flat one-step algorithm wins small
  // all-reduces; from 16 MiB on hierarchical wins, with a between-node algorithm that sends each byte at
  // most about twice (on 2 nodes all three do).
  const coll_model_table gpu = gpu_initiated_network(proxy);
  for (int k : {2, 16, 128}) {
    const node_shape shape{8, k};
    EXPECT_EQ(net_model_choice(gpu, collective::reduce, shape, 8).algo, algorithm::one_shot) << k;
    for (std::uint64_t bytes : sizes()) {
      if (bytes < (16ull << 20)) continue;
      const net_prediction p = net_model_choice(gpu, collective::reduce, shape, bytes);
      EXPECT_EQ(p.algo, algorithm::hierarchical) << k << " nodes, " << bytes;
      if (k > 2) {
        EXPECT_NE(p.between, net_algorithm::recursive_doubling) << k << " nodes, " << bytes;
      }
    }
  }
  // Many nodes, small blocks: hierarchical alltoall sends k - 1 messages where flat sends n - m.
  EXPECT_EQ(net_model_choice(proxy, collective::alltoall, {8, 128}, 64).algo, algorithm::hierarchical);
  // Across nodes the proxy's step and message costs make every small call slower than within a node.
  for (collective op : {collective::reduce, collective::alltoall})
    EXPECT_GT(net_model_choice(proxy, op, {8, 2}, 8).us, net_model_choice(proxy, op, {8, 1}, 8).us);
}

TEST(ScaleModel, GpuInitiatedNetworkSavesTheProxy) {
  const coll_model_table proxy;
  const coll_model_table gpu = gpu_initiated_network(proxy);
  EXPECT_LT(gpu.net_post_us, proxy.net_post_us);
  EXPECT_LT(gpu.net_msg_us, proxy.net_msg_us);
  EXPECT_EQ(gpu.nic_gbps, proxy.nic_gbps);
  EXPECT_EQ(gpu.net_step_us, proxy.net_step_us);
  for (node_shape shape : kShapes) {
    for (collective op : {collective::reduce, collective::alltoall}) {
      for (std::uint64_t bytes : sizes()) {
        const double with_proxy = net_model_choice(proxy, op, shape, bytes).us;
        const double from_gpu = net_model_choice(gpu, op, shape, bytes).us;
        EXPECT_LE(from_gpu, with_proxy) << to_string(op) << " " << bytes;
      }
    }
  }
}

TEST(ScaleModel, BusBandwidthCountsAsNcclTests) {
  // 1000 bytes in 1 us on 4 PEs: all-reduce 2 x 3/4 x 1000 bytes, alltoall and fcollect 3 x 1000, broadcast 1000.
  EXPECT_DOUBLE_EQ(bus_gbps(collective::reduce, 4, 1000, 1), 1.5);
  EXPECT_DOUBLE_EQ(bus_gbps(collective::alltoall, 4, 1000, 1), 3);
  EXPECT_DOUBLE_EQ(bus_gbps(collective::fcollect, 4, 1000, 1), 3);
  EXPECT_DOUBLE_EQ(bus_gbps(collective::reducescatter, 4, 1000, 1), 3);
  EXPECT_DOUBLE_EQ(bus_gbps(collective::broadcast, 4, 1000, 1), 1);
  EXPECT_DOUBLE_EQ(bus_gbps(collective::barrier, 4, 1000, 1), 0);
}

TEST(CostModel, NetworkKeysParse) {
  const coll_model_table t = parse_coll_model(
      "nic_gbps = 23\n"
      "net_step_us = 1.5\n"
      "net_post_us = 0   # driven from the GPU\n"
      "net_msg_us = 0.05\n"
      "gpus_per_node = 4\n"
      "nodes = 32\n",
      "net.model");
  EXPECT_DOUBLE_EQ(t.nic_gbps, 23);
  EXPECT_DOUBLE_EQ(t.net_step_us, 1.5);
  EXPECT_DOUBLE_EQ(t.net_post_us, 0);
  EXPECT_DOUBLE_EQ(t.net_msg_us, 0.05);
  EXPECT_EQ(t.gpus_per_node, 4);
  EXPECT_EQ(t.nodes, 32);
  EXPECT_DOUBLE_EQ(t.link_gbps, coll_model_table{}.link_gbps);  // left out: default
  // Defaults describe 8 GPUs a node, one 400 Gb/s NIC each.
  EXPECT_EQ(coll_model_table{}.gpus_per_node, 8);
  EXPECT_LE(coll_model_table{}.nic_gbps, 50.0);

  // format -> parse reproduces every value, the node shape included.
  coll_model_table shaped = kRoundNet;
  shaped.gpus_per_node = 4;
  shaped.nodes = 300;
  const coll_model_table back = parse_coll_model(format_coll_model(shaped), "shaped");
  for (const auto& key : kCollModelKeys) EXPECT_DOUBLE_EQ(back.*key.field, shaped.*key.field) << key.name;
  for (const auto& key : kCollModelCountKeys) EXPECT_EQ(back.*key.field, shaped.*key.field) << key.name;

  const std::pair<const char*, const char*> bad[] = {
      {"nic_gbps = 0\n", "must be > 0"},
      {"net_msg_us = -0.1\n", "must be >= 0"},
      {"gpus_per_node = 2.5\n", "must be a whole number from 1"},
      {"nodes = 0\n", "must be a whole number from 1"},
      {"nodes = 1e9\n", "must be a whole number from 1"},
      {"nodes = many\n", "'many' is not a number for nodes"},
      {"nodes = 2\nnodes = 4\n", "set twice"},
      {"gpus_node = 8\n", "unknown key 'gpus_node'"},
  };
  for (const auto& [text, why] : bad) {
    try {
      parse_coll_model(text, "net.model");
      ADD_FAILURE() << text << " was accepted";
    } catch (const shoal::error& e) {
      EXPECT_EQ(e.category(), errc::config);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace shoal::detail
