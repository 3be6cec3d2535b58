#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/config.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

config load_with(std::map<std::string, std::string> vars) {
  return config::load([vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(Config, DefaultsParse) {
  config c = load_with({});
  EXPECT_EQ(c.log_level, "warn");
  EXPECT_EQ(c.rank, -1);
  EXPECT_EQ(c.heap_size, 1ull << 30);
  EXPECT_DOUBLE_EQ(c.bootstrap_timeout, 60.0);
}

TEST(Config, ValuesOverrideDefaults) {
  config c = load_with({{"SHOAL_HEAP_SIZE", "64M"},
                        {"SHOAL_BOOTSTRAP_TIMEOUT", "500ms"},
                        {"SHOAL_LOG_LEVEL", "debug"},
                        {"SHOAL_LOG_SUBSYSTEMS", "heap,bootstrap"}});
  EXPECT_EQ(c.heap_size, 64ull << 20);
  EXPECT_DOUBLE_EQ(c.bootstrap_timeout, 0.5);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.log_subsystems, (std::vector<std::string>{"heap", "bootstrap"}));
}

// A bad value must be an error that names the variable and says what it accepts.
void expect_rejected(const char* name, const char* value, const char* accepted_hint) {
  try {
    load_with({{name, value}});
    FAIL() << name << "=" << value << " was accepted";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.category(), errc::config);
    std::string what = e.what();
    EXPECT_NE(what.find(name), std::string::npos) << what;
    EXPECT_NE(what.find(value), std::string::npos) << what;
    EXPECT_NE(what.find(accepted_hint), std::string::npos) << what;
  }
}

TEST(Config, BadValuesNameTheVariable) {
  expect_rejected("SHOAL_LOG_LEVEL", "loud", "error,warn,info,debug,trace");
  expect_rejected("SHOAL_LOG_SUBSYSTEMS", "heap,gpu", "bootstrap");
  expect_rejected("SHOAL_HEAP_SIZE", "12Q", "a size");
  expect_rejected("SHOAL_HEAP_SIZE", "1K", "2M..1T");
  expect_rejected("SHOAL_BOOTSTRAP_TIMEOUT", "-3", "duration");
  expect_rejected("SHOAL_BOOTSTRAP_TIMEOUT", "soon", "duration");
  expect_rejected("SHOAL_EMULATE_NODES", "0", "1..4096");
  expect_rejected("SHOAL_RANK", "3x", "an integer");
}

// Booleans (SHOAL_COLL_PDL, default on): every spelling of yes and no, in any case; anything else names
// the variable and the spellings it takes.
TEST(Config, BooleansTakeEverySpellingAndNothingElse) {
  EXPECT_TRUE(load_with({}).coll_pdl);
  for (const char* yes : {"1", "true", "YES", "On"}) EXPECT_TRUE(load_with({{"SHOAL_COLL_PDL", yes}}).coll_pdl) << yes;
  for (const char* no : {"0", "false", "No", "OFF"}) EXPECT_FALSE(load_with({{"SHOAL_COLL_PDL", no}}).coll_pdl) << no;
  expect_rejected("SHOAL_COLL_PDL", "maybe", "one of 1, 0, true, false, yes, no, on, off");
  expect_rejected("SHOAL_COLL_PDL", "2", "one of 1, 0");
}

TEST(Config, TableNamesAreUpperCaseAndUnique) {
  std::map<std::string, int> seen;
  for (const config_var& var : config_table()) {
    std::string name = var.name;
    EXPECT_TRUE(name.starts_with("SHOAL_")) << name;
    for (char ch : name) EXPECT_FALSE(std::islower(static_cast<unsigned char>(ch))) << name;
    EXPECT_EQ(seen[name]++, 0) << name;
    EXPECT_GT(std::string(var.description).size(), 10u) << name;
  }
  EXPECT_GE(seen.size(), 10u);
}

// Nothing reads a SHOAL_* variable the table lacks, so init warns about each one that is close to a table
// name, naming that one; other variables, the table's own, and SHOAL_* names far from every table name
// (other programs' own) pass without a word.
TEST(Config, UnknownVariablesAreNamedWithTheOneTheyMayMean) {
  const std::vector<const char*> environment = {
      "PATH=/usr/bin", "SHOAL_HEAP_SIZE=1G",  "SHOAL_HEAP_SIZ=4G",          "shoal_log_level=info",
      "NOT_SHOAL_X=1", "SHOAL_WAIT_TIMOUT=5", "SHOAL_MY_OWN_TOOL_SETTING=1"};
  const std::vector<std::string> warnings = unknown_variable_warnings(environment);
  ASSERT_EQ(warnings.size(), 3u);
  auto says = [&](std::size_t i, const char* text) {
    EXPECT_NE(warnings[i].find(text), std::string::npos) << "'" << text << "' not in: " << warnings[i];
  };
  says(0, "SHOAL_HEAP_SIZ is set");
  says(0, "did you mean SHOAL_HEAP_SIZE?");
  says(1, "shoal_log_level is set");
  says(1, "did you mean SHOAL_LOG_LEVEL?");
  says(2, "did you mean SHOAL_WAIT_TIMEOUT?");
  // What shoal's own tools, scripts and tests read beside the table: a warning on every PE of every such run
  // would be noise.
  const std::vector<const char*> ours = {
      "SHOAL_COMMIT=abc",    "SHOAL_PERF_PLOT_SCRIPT=p",   "SHOAL_PERF_NCCL=1",        "SHOAL_PERF_NVSHMEM=1",
      "SHOAL_PERF_ARGS=x",   "SHOAL_BUILD_DIR=b",          "SHOAL_MP_SCENARIO=exit:1", "SHOAL_MP_FILE_ROOM=6",
      "SHOAL_TEST_MARKER=1", "SHOAL_TEST_SHARED_SCRATCH=1"};
  for (const std::string& w : unknown_variable_warnings(ours)) ADD_FAILURE() << w;
  std::vector<const char*> table_only;
  for (const config_var& var : config_table()) table_only.push_back(var.name);
  EXPECT_TRUE(unknown_variable_warnings(table_only).empty());
}

TEST(Config, BytesSuffixes) {
  EXPECT_EQ(parse_bytes("X", "4096"), 4096u);
  EXPECT_EQ(parse_bytes("X", "2k"), 2048u);
  EXPECT_EQ(parse_bytes("X", "3MiB"), 3u << 20);
  EXPECT_EQ(parse_bytes("X", "1GB"), 1ull << 30);
  EXPECT_THROW(parse_bytes("X", "1Z"), shoal::error);
  EXPECT_THROW(parse_bytes("X", "99999999999T"), shoal::error);
  EXPECT_EQ(parse_bytes("X", "7B"), 7u);
  EXPECT_EQ(parse_bytes("X", "1tib"), 1ull << 40);
  // Suffixes that only look like sizes.
  for (const char* bad : {"1BB", "1IB", "1KK", "1KBB", "1MiBs", "1 K", "K"})
    EXPECT_THROW(parse_bytes("X", bad), shoal::error) << bad;
}

TEST(Config, SecondsTakeDecimalNumbersOnly) {
  EXPECT_DOUBLE_EQ(parse_seconds("X", "30"), 30.0);
  EXPECT_DOUBLE_EQ(parse_seconds("X", "2.5"), 2.5);
  EXPECT_DOUBLE_EQ(parse_seconds("X", ".5s"), 0.5);
  EXPECT_DOUBLE_EQ(parse_seconds("X", "500ms"), 0.5);
  EXPECT_DOUBLE_EQ(parse_seconds("X", "5m"), 300.0);
  EXPECT_DOUBLE_EQ(parse_seconds("X", "1e1"), 10.0);
  for (const char* bad : {"0x10", " 5", "inf", "nan", "-1", "", "s", "5 s", "+5"})
    EXPECT_THROW(parse_seconds("X", bad), shoal::error) << '"' << bad << '"';
}

}  // namespace
}  // namespace shoal::detail
