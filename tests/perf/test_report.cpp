// shoal-perf's reporter: what it makes of a row. A figure above the ceiling is no result, a failed check
// outranks everything, targets give pass or miss (and none when PEs share a GPU), collectives are held to
// the ceiling by their bus bandwidth, and every JSON row carries the run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "report.hpp"
#include "targets.hpp"

namespace {

using namespace shoal::perf;

run_info a_run(int n_pes, bool pes_share_gpus = false) {
  return run_info{.suite = "quick",
                  .machine = pes_share_gpus ? "NVIDIA H200 x1 (8 PEs)" : "NVIDIA H200 x2",
                  .date = "2026-12-01T00:00:00Z",
                  .commit = "0123456789ab",
                  .shoal_version = "0.1.0",
                  .n_pes = n_pes,
                  .launch_floor_us = 4.2,
                  .warmup = 1,
                  .reps = 3,
                  .pes_share_gpus = pes_share_gpus};
}

row a_put(double gbs, check_result check = check_result::ok) {
  row r;
  r.op = "put";
  r.scope = "block";
  r.metric = "bandwidth";
  r.bytes = 1 << 20;
  r.t.median_us = double(r.bytes) / (gbs * 1e3);
  r.bandwidth_gbs = gbs;
  r.ceiling_gbs = 400;
  r.check = check;
  return r;
}

row an_allreduce(double algbw_gbs) {
  row r = a_put(algbw_gbs);
  r.op = "reduce";
  r.scope = "stream";
  return r;
}

// PE 1 neither prints nor writes, but judges every row as PE 0 does.
const row& judged(reporter& out, row r) {
  out.add(std::move(r));
  return out.rows().back();
}

TEST(PerfReport, FigureAboveTheCeilingIsAMeasurementError) {
  reporter out(1, a_run(2), "");
  const row& r = judged(out, a_put(450));
  EXPECT_EQ(r.status, "measurement error");
  EXPECT_TRUE(std::isnan(r.bandwidth_gbs));
  EXPECT_NE(r.note.find("above the 400 GB/s ceiling"), std::string::npos) << r.note;
  EXPECT_EQ(judged(out, a_put(390)).status, "ok");
  EXPECT_EQ(out.measurement_errors(), 1);
}

// NCCL's or NVSHMEM's figure above the ceiling is dropped and flagged on its own: shoal's row stays a result.
TEST(PerfReport, PeerFigureAboveTheCeilingKeepsShoalsVerdict) {
  reporter out(1, a_run(2), "");
  row r = a_put(335);
  r.aim = &find_target("put_1M");  // >= 330 GB/s
  r.nccl = {.time_us = 2.0, .bandwidth_gbs = 450, .check = check_result::ok};
  r.nvshmem = {.time_us = 3.0, .bandwidth_gbs = 350, .check = check_result::ok};
  const row& got = judged(out, r);
  EXPECT_EQ(got.status, "ok");
  EXPECT_EQ(got.verdict, "pass");
  EXPECT_DOUBLE_EQ(got.bandwidth_gbs, 335);
  EXPECT_TRUE(got.nccl.above_ceiling);
  EXPECT_TRUE(std::isnan(got.nccl.bandwidth_gbs));
  EXPECT_FALSE(got.nvshmem.above_ceiling);
  EXPECT_DOUBLE_EQ(got.nvshmem.bandwidth_gbs, 350);
  EXPECT_NE(got.note.find("NCCL measured 450.0 GB/s, above the 400 GB/s ceiling"), std::string::npos) << got.note;
  EXPECT_EQ(out.measurement_errors(), 0);

  // A target judged against NCCL's time is not judged against a NCCL figure that is no result.
  row vs_nccl = an_allreduce(100);
  vs_nccl.aim = &find_target("allreduce_4K_vs_nccl");
  vs_nccl.nccl = {.time_us = 2 * vs_nccl.t.median_us, .bandwidth_gbs = 450, .check = check_result::ok};
  EXPECT_EQ(judged(out, vs_nccl).verdict, "-");
  vs_nccl.nccl.bandwidth_gbs = 50;
  EXPECT_EQ(judged(out, vs_nccl).verdict, "miss");  // time / NCCL's = 0.5 > 0.4
}

// quick's best-of rows pass over a configuration above the ceiling rather than report it.
TEST(PerfReport, BestCandidatePassesOverFiguresAboveTheCeiling) {
  const std::vector<row> broken_one = {a_put(300), a_put(450), a_put(320), a_put(310)};
  EXPECT_EQ(best_candidate(broken_one), 2u);
  const std::vector<row> all_above = {a_put(420), a_put(450)};
  EXPECT_EQ(best_candidate(all_above), 1u);  // the row then reports a measurement error
  const std::vector<row> one_failed = {a_put(300), a_put(200, check_result::failed), a_put(450, check_result::failed)};
  EXPECT_EQ(best_candidate(one_failed), 1u);  // the first failed check, so it is seen
  const std::vector<row> above_first = {a_put(450), a_put(100)};
  EXPECT_EQ(best_candidate(above_first), 1u);
}

TEST(PerfReport, CollectivesAreHeldToTheCeilingByBusBandwidth) {
  // All-reduce bus bandwidth = algbw x 2(n-1)/n: 300 GB/s is 300 bus at 2 PEs but 525 at 8.
  reporter two(1, a_run(2), "");
  EXPECT_EQ(judged(two, an_allreduce(300)).status, "ok");
  reporter eight(1, a_run(8), "");
  EXPECT_EQ(judged(eight, an_allreduce(300)).status, "measurement error");
  EXPECT_DOUBLE_EQ(bus_factor("reduce", 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor("alltoall", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor("broadcast", 8), 1.0);
  EXPECT_TRUE(std::isnan(bus_factor("put", 2)));
}

TEST(PerfReport, FailedCheckOutranksEverything) {
  reporter out(1, a_run(2), "");
  row r = a_put(450, check_result::failed);  // above the ceiling too
  r.aim = &find_target("put_1M");
  const row& got = judged(out, r);
  EXPECT_EQ(got.status, "FAILED");
  EXPECT_EQ(got.verdict, "FAILED");
  EXPECT_EQ(out.failures(), 1);

  row nccl_failed = a_put(300);
  nccl_failed.nccl.check = check_result::failed;
  EXPECT_EQ(judged(out, nccl_failed).status, "NCCL FAILED");
  EXPECT_EQ(out.failures(), 2);
}

TEST(PerfReport, TargetsGivePassOrMiss) {
  reporter out(1, a_run(2), "");
  const target& put_1m = find_target("put_1M");  // >= 330 GB/s
  row fast = a_put(335), slow = a_put(320);
  fast.aim = slow.aim = &put_1m;
  EXPECT_EQ(judged(out, fast).verdict, "pass");
  EXPECT_EQ(judged(out, slow).verdict, "miss");

  row p = a_put(1);  // a latency row: judged on its time
  p.op = "p_pingpong";
  p.metric = "latency";
  p.bandwidth_gbs = kNaN;
  p.aim = &find_target("p_one_way");  // <= 0.75 us
  p.t.median_us = 0.70;
  EXPECT_EQ(judged(out, p).verdict, "pass");
  p.t.median_us = 0.80;
  EXPECT_EQ(judged(out, p).verdict, "miss");
}

TEST(PerfReport, NoTargetIsJudgedWhenPesShareAGpu) {
  reporter out(1, a_run(8, /*pes_share_gpus=*/true), "");
  row r = a_put(335);
  r.aim = &find_target("put_1M");
  const row& got = judged(out, r);
  EXPECT_EQ(got.status, "ok");
  EXPECT_EQ(got.verdict, "-");
}

// TARGETS.md sets its collective and barrier figures for 2 PEs; point-to-point moves PE 0 -> PE 1 at any count.
TEST(PerfReport, TwoPeTargetsAreJudgedOnlyAtTwoPes) {
  auto allreduce_1m = [](double us) {
    row r = an_allreduce(100);  // bus bandwidth 175 GB/s at 8 PEs: under the ceiling
    r.metric = "latency";
    r.t.median_us = us;
    r.aim = &find_target("allreduce_1M");  // <= 9 us
    return r;
  };
  reporter two(1, a_run(2), "");
  EXPECT_EQ(judged(two, allreduce_1m(8)).verdict, "pass");
  EXPECT_EQ(judged(two, allreduce_1m(10)).verdict, "miss");

  reporter eight(1, a_run(8), "");
  const row& r = judged(eight, allreduce_1m(8));
  EXPECT_EQ(r.status, "ok");
  EXPECT_EQ(r.verdict, "-");
  EXPECT_DOUBLE_EQ(r.t.median_us, 8);  // the figure stays
  EXPECT_NE(r.note.find("the target is for 2 PEs, this run has 8"), std::string::npos) << r.note;
  row barrier = allreduce_1m(2);
  barrier.op = "barrier_all_on_stream";
  barrier.aim = &find_target("barrier_on_stream");
  EXPECT_EQ(judged(eight, barrier).verdict, "-");
  row put = a_put(335);
  put.aim = &find_target("put_1M");
  EXPECT_EQ(judged(eight, put).verdict, "pass");
}

TEST(PerfReport, JsonRowsCarryTheRun) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("shoal_perf_report_" + std::to_string(::getpid()) + ".jsonl");
  {
    reporter out(0, a_run(2), path.string());
    row ok = a_put(300);
    ok.aim = &find_target("put_1M");
    out.add(ok);
    out.add(a_put(450));
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  std::filesystem::remove(path);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& j : rows) {
    EXPECT_EQ(j["machine"], "NVIDIA H200 x2");
    EXPECT_EQ(j["commit"], "0123456789ab");
    EXPECT_EQ(j["n_pes"], 2);
    EXPECT_EQ(j["suite"], "quick");
  }
  EXPECT_DOUBLE_EQ(rows[0]["bandwidth_gbs"].get<double>(), 300);
  EXPECT_EQ(rows[0]["verdict"], "miss");
  EXPECT_EQ(rows[0]["target_key"], "put_1M");
  EXPECT_TRUE(rows[1]["bandwidth_gbs"].is_null());
  EXPECT_EQ(rows[1]["status"], "measurement error");
}

// The collective summary names the algorithm of the on-stream rows (which may say the copy engines carried
// them), not the first mode's in alphabetical order (a one-block row's pick can differ).
TEST(PerfReport, CollectiveSummaryShowsTheOnStreamAlgorithm) {
  reporter out(0, a_run(2), "");
  out.section("coll", false, table_layout::coll);
  for (const auto& [scope, algo] : {std::pair{"block", "two_shot"}, std::pair{"grid", "two_shot"},
                                    std::pair{"graph", "two_shot+ce"}, std::pair{"stream", "two_shot+ce"}}) {
    row r = an_allreduce(300);
    r.bytes = std::uint64_t{64} << 20;
    r.t.median_us = double(r.bytes) / (300 * 1e3);
    r.scope = scope;
    r.algo = algo;
    testing::internal::CaptureStdout();
    out.add(r);
    testing::internal::GetCapturedStdout();
  }
  testing::internal::CaptureStdout();
  out.summary();
  const std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_NE(printed.find("64M two_shot+ce"), std::string::npos) << printed;
}

}  // namespace
