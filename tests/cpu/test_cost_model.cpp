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
  // reducescatter direct, 3 PEs, 5000-byte blocks: 2 + 10000 / 1000 + 20000 / 10000
  EXPECT_DOUBLE_EQ(predict_us(kRound, collective::reducescatter, algorithm::direct, 3, 5000), 14);
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
  // On 2 PEs: one_shot at 256 KiB, two_shot from a few MiB.
  EXPECT_EQ(model_choice(table, collective::reduce, 2, 256 << 10), algorithm::one_shot);
  EXPECT_EQ(model_choice(table, collective::reduce, 2, 64 << 20), algorithm::two_shot);
  // On 8 PEs every regime appears.
  std::map<algorithm, int> seen;
  for (std::uint64_t bytes : sizes()) ++seen[model_choice(table, collective::reduce, 8, bytes)];
  for (algorithm a : {algorithm::ll, algorithm::one_shot, algorithm::two_shot}) EXPECT_GT(seen[a], 0) << to_string(a);
  // The default table's predictions meet TARGETS.md's 2-PE all-reduce figures (4 us launch floor).
  EXPECT_LE(table.launch_us + predict_us(table, collective::reduce, algorithm::one_shot, 2, 256 << 10), 7.0);
  EXPECT_LE(table.launch_us + predict_us(table, collective::reduce, algorithm::one_shot, 2, 1 << 20), 9.0);
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
  };
  const int line_of[] = {2, 2, 3, 1, 1, 1, 1, 1, 2};
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

}  // namespace
}  // namespace shoal::detail
