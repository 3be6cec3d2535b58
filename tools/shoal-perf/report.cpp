#include "report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <stdexcept>

namespace shoal::perf {

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "-";
  const double a = std::fabs(v);
  if (a < 1) return fmt::format("{:.3f}", v);
  if (a < 10) return fmt::format("{:.2f}", v);
  if (a < 1000) return fmt::format("{:.1f}", v);
  return fmt::format("{:.0f}", v);
}

nlohmann::json json_number(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

std::string target_text(const target& t) {
  switch (t.kind) {
    case goal::at_least_gbs: return fmt::format(">= {:g} GB/s", t.value);
    case goal::at_least_busbw_gbs: return fmt::format(">= {:g} GB/s bus", t.value);
    case goal::at_most_us: return fmt::format("<= {:g} us", t.value);
    case goal::at_most_nccl_time: return fmt::format("time <= {:g} x NCCL", t.value);
  }
  return "?";
}

// Column layouts shared by the headings and the rows.
constexpr std::string_view kRowFormat =
    "{:<22} {:<6} {:>5} {:>10} {:>6} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6} {:>9} {:>9} {:>6} {:>6}  {}";
constexpr std::string_view kCollRowFormat =
    "{:<13} {:<6} {:>5} {:<11} {:>10} {:>5} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>8} {:>6} {:>9} {:>8} {:>6} {:>6}  "
    "{}";
constexpr std::string_view kTargetFormat = "{:<19} {:<5}";

// shoal's figure over an incumbent's ("-" without one): above 1, shoal is ahead.
std::string ratio_text(double ratio) { return std::isnan(ratio) ? "-" : fmt::format("{:.2f}", ratio); }

constexpr std::string_view kCollectiveOps[] = {"reduce", "reducescatter", "fcollect", "alltoall", "broadcast", "barrier"};

}  // namespace

const char* to_string(check_result c) {
  switch (c) {
    case check_result::ok:
      return "ok";
    case check_result::failed:
      return "FAILED";
    case check_result::not_checked:
      return "-";
  }
  return "?";
}

bool is_collective_op(std::string_view op) {
  return std::find(std::begin(kCollectiveOps), std::end(kCollectiveOps), op) != std::end(kCollectiveOps);
}

double bus_factor(std::string_view op, int n_pes) {
  const double n = n_pes;
  if (op == "reduce") return 2 * (n - 1) / n;
  if (op == "reducescatter" || op == "fcollect" || op == "alltoall") return (n - 1) / n;
  if (op == "broadcast") return 1;
  return kNaN;
}

std::size_t best_candidate(std::span<const row> candidates) {
  auto rank = [](const row& r) {  // 2: a failed check; 1: a result; 0: above the ceiling (NaN compares false)
    if (r.check == check_result::failed) return 2;
    return r.bandwidth_gbs > r.ceiling_gbs ? 0 : 1;
  };
  std::size_t best = 0;
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    const row& c = candidates[i];
    const row& b = candidates[best];
    if (rank(c) > rank(b) || (rank(c) == rank(b) && rank(c) < 2 && c.bandwidth_gbs > b.bandwidth_gbs)) best = i;
  }
  return best;
}

std::string format_bytes(std::uint64_t bytes) {
  constexpr const char* kUnits[] = {"", "K", "M", "G", "T"};
  int unit = 0;
  while (unit < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{}{}", bytes, kUnits[unit]);
}

reporter::reporter(int pe, run_info info, const std::string& json_path)
    : printing_(pe == 0), info_(std::move(info)) {
  if (printing_ && !json_path.empty()) {
    json_ = std::fopen(json_path.c_str(), "w");
    if (json_ == nullptr)
      throw std::runtime_error(fmt::format("cannot open --json file '{}': {}", json_path, std::strerror(errno)));
  }
}

reporter::~reporter() {
  if (json_ != nullptr) std::fclose(json_);
}

void reporter::header() const {
  if (!printing_) return;
  fmt::print("shoal-perf {}  |  {}  |  {} PEs  |  {}  |  commit {}\n", info_.suite, info_.machine, info_.n_pes, info_.date,
             info_.commit);
  fmt::print(
      "shoal {}  |  NCCL {}  |  NVSHMEM {}  |  warm-up {} + {} timed batches, median (p10/p90)  |  buffers {}  |  "
      "quiet {}\n",
      info_.shoal_version, info_.nccl_version.empty() ? "not in this run" : info_.nccl_version,
      info_.nvshmem_version.empty() ? "not in this run" : info_.nvshmem_version, info_.warmup, info_.reps,
      info_.rotate ? "rotated past 2 x L2" : "not rotated",
      info_.quiet_each ? "after each message" : "once per kernel");
  fmt::print("launch floor: {} us per empty kernel launch (back to back on one stream)\n",
             number(info_.launch_floor_us));
  std::fflush(stdout);
}

void reporter::section(std::string_view title, bool with_targets, table_layout layout) {
  with_targets_ = with_targets;
  layout_ = layout;
  if (!printing_) return;
  fmt::print("\n== {}\n", title);
  const std::string last =
      with_targets_ ? fmt::format(fmt::runtime(kTargetFormat), "target", "verdict") : std::string("status");
  if (layout_ == table_layout::coll)
    fmt::print(fmt::runtime(kCollRowFormat), "op", "mode", "bytes", "algo", "ctas x thr", "ops", "time_us", "p10_us",
               "p90_us", "algbw", "busbw", "nccl_us", "nccl_bus", "x_nccl", "nvs_us", "nvs_bus", "x_nvs", "check",
               last);
  else
    fmt::print(fmt::runtime(kRowFormat), "op", "scope", "bytes", "ctas x thr", "ops", "time_us", "p10_us", "p90_us",
               "GB/s", "nccl_us", "nccl_GB/s", "x_nccl", "nvs_us", "nvs_GB/s", "x_nvs", "check", last);
  fmt::print("\n");
  std::fflush(stdout);
}

void reporter::note(std::string_view text) const {
  if (!printing_) return;
  fmt::print("   {}\n", text);
  std::fflush(stdout);
}

void reporter::add(row r) {
  // Status: a failed check outranks everything; a figure above the machine's ceiling is not a result.
  r.suite = info_.suite;
  auto append_note = [&](const std::string& s) { r.note = r.note.empty() ? s : r.note + "; " + s; };
  r.status = "ok";
  if (r.check == check_result::failed) {
    r.status = "FAILED";
  } else if (r.nccl.check == check_result::failed) {
    r.status = "NCCL FAILED";
  } else if (r.nvshmem.check == check_result::failed) {
    r.status = "NVSHMEM FAILED";
  }
  // Collectives are held against the ceiling by their bus bandwidth: an alltoall's or fcollect's
  // algorithm bandwidth counts the local block too and may exceed what the links carry.
  const bool coll = is_collective_op(r.op);
  const double factor = bus_factor(r.op, info_.n_pes);
  const char* unit = coll ? "GB/s bus bandwidth" : "GB/s";
  // Each figure's bus bandwidth; one above the machine's ceiling is no result: dropped, with a note.
  auto judge = [&](double& bandwidth_gbs, const char* who, bool& above) {
    double bus = bandwidth_gbs * factor;
    const double judged = coll ? bus : bandwidth_gbs;
    above = !std::isnan(r.ceiling_gbs) && judged > r.ceiling_gbs;
    if (above) {
      append_note(fmt::format("{}measured {:.1f} {}, above the {:.0f} GB/s ceiling", who, judged, unit, r.ceiling_gbs));
      bandwidth_gbs = bus = kNaN;
    }
    return bus;
  };
  bool above = false;
  double busbw = judge(r.bandwidth_gbs, "", above);
  if (above && r.status == "ok") r.status = "measurement error";
  // An incumbent's figure above the ceiling is flagged on its own: shoal's figure and verdict stand.
  const double nccl_busbw = judge(r.nccl.bandwidth_gbs, "NCCL ", r.nccl.above_ceiling);
  const double nvshmem_busbw = judge(r.nvshmem.bandwidth_gbs, "NVSHMEM ", r.nvshmem.above_ceiling);
  if (r.aim != nullptr) {
    if (r.status != "ok") {
      r.verdict = r.status;
    } else if (info_.pes_share_gpus) {
      r.verdict = "-";
    } else if (r.aim->pes != kAnyPes && r.aim->pes != info_.n_pes) {
      r.verdict = "-";
      append_note(fmt::format("not judged: the target is for {} PEs, this run has {}", r.aim->pes, info_.n_pes));
    } else {
      double value = kNaN;
      bool pass = false;
      switch (r.aim->kind) {
        case goal::at_least_gbs:
          value = r.bandwidth_gbs;
          pass = value >= r.aim->value;
          break;
        case goal::at_least_busbw_gbs:
          value = busbw;
          pass = value >= r.aim->value;
          break;
        case goal::at_most_us:
          value = r.t.median_us;
          pass = value <= r.aim->value;
          break;
        case goal::at_most_nccl_time:  // not against a NCCL figure that is no result
          value = r.nccl.above_ceiling ? kNaN : r.t.median_us / r.nccl.time_us;
          pass = value <= r.aim->value;
          break;
      }
      r.verdict = std::isnan(value) ? "-" : (pass ? "pass" : "miss");
    }
  }
  // Bandwidth ratios; for latency rows (no bandwidth) the ratio of times, so above 1 is shoal ahead either way.
  auto ratio_to = [&](const peer_figure& f) {
    return r.metric == "latency" ? f.time_us / r.t.median_us : r.bandwidth_gbs / f.bandwidth_gbs;
  };
  const double ratio = ratio_to(r.nccl), nvshmem_ratio = ratio_to(r.nvshmem);

  if (printing_) {
    std::string shape = r.ctas > 0 ? fmt::format("{} x {}", r.ctas, r.threads) : "-";
    std::string last = r.status;
    if (with_targets_) {
      last = fmt::format(fmt::runtime(kTargetFormat), r.aim ? target_text(*r.aim) : "", r.verdict);
      if (r.status != "ok" && r.status != r.verdict) last += " " + r.status;
    }
    if (!r.what.empty() && r.metric == "latency") last += fmt::format("  ({})", r.what);
    if (!r.note.empty()) last += "  " + r.note;
    const std::string bytes = r.metric == "latency" && r.bytes == 0 ? "-" : format_bytes(r.bytes);
    if (layout_ == table_layout::coll)
      fmt::print(fmt::runtime(kCollRowFormat), r.op, r.scope, bytes, r.algo, shape, r.ops, number(r.t.median_us),
                 number(r.t.p10_us), number(r.t.p90_us), number(r.bandwidth_gbs), number(busbw), number(r.nccl.time_us),
                 number(nccl_busbw), ratio_text(ratio), number(r.nvshmem.time_us), number(nvshmem_busbw),
                 ratio_text(nvshmem_ratio), to_string(r.check), last);
    else
      fmt::print(fmt::runtime(kRowFormat), r.op, r.scope, bytes, shape, r.ops, number(r.t.median_us),
                 number(r.t.p10_us), number(r.t.p90_us), number(r.bandwidth_gbs), number(r.nccl.time_us),
                 number(r.nccl.bandwidth_gbs), ratio_text(ratio), number(r.nvshmem.time_us),
                 number(r.nvshmem.bandwidth_gbs), ratio_text(nvshmem_ratio), to_string(r.check), last);
    fmt::print("\n");
    std::fflush(stdout);
  }

  if (json_ != nullptr) {
    nlohmann::json j = {
        {"suite", info_.suite},
        {"op", r.op},
        {"scope", r.scope},
        {"algo", r.algo},
        {"metric", r.metric},
        {"what", r.what},
        {"from_pe", r.from_pe},
        {"to_pe", r.to_pe},
        {"bytes", r.bytes},
        {"ctas", r.ctas},
        {"threads", r.threads},
        {"ops", r.ops},
        {"time_us", json_number(r.t.median_us)},
        {"p10_us", json_number(r.t.p10_us)},
        {"p90_us", json_number(r.t.p90_us)},
        {"bandwidth_gbs", json_number(r.bandwidth_gbs)},
        {"nccl_time_us", json_number(r.nccl.time_us)},
        {"nccl_bandwidth_gbs", json_number(r.nccl.bandwidth_gbs)},
        {"nccl_ratio", json_number(ratio)},
        {"nvshmem_time_us", json_number(r.nvshmem.time_us)},
        {"nvshmem_bandwidth_gbs", json_number(r.nvshmem.bandwidth_gbs)},
        {"nvshmem_ratio", json_number(nvshmem_ratio)},
        {"collective", coll},
        {"busbw_gbs", json_number(busbw)},
        {"nccl_busbw_gbs", json_number(nccl_busbw)},
        {"nvshmem_busbw_gbs", json_number(nvshmem_busbw)},
        {"ceiling_gbs", json_number(r.ceiling_gbs)},
        {"check", to_string(r.check)},
        {"nccl_check", to_string(r.nccl.check)},
        {"nvshmem_check", to_string(r.nvshmem.check)},
        {"nccl_above_ceiling", r.nccl.above_ceiling},
        {"nvshmem_above_ceiling", r.nvshmem.above_ceiling},
        {"status", r.status},
        {"note", r.note},
        {"target", r.aim ? nlohmann::json(target_text(*r.aim)) : nlohmann::json(nullptr)},
        {"target_key", r.aim ? nlohmann::json(std::string(r.aim->key)) : nlohmann::json(nullptr)},
        {"verdict", r.verdict},
        {"machine", info_.machine},
        {"date", info_.date},
        {"commit", info_.commit},
        {"shoal_version", info_.shoal_version},
        {"nccl_version", info_.nccl_version},
        {"nvshmem_version", info_.nvshmem_version},
        {"n_pes", info_.n_pes},
        {"launch_floor_us", json_number(info_.launch_floor_us)},
        {"warmup", info_.warmup},
        {"reps", info_.reps},
        {"rotate", info_.rotate},
        {"quiet", info_.quiet_each ? "each" : "end"},
    };
    std::string line = j.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), json_);
    std::fflush(json_);  // a run cut short (a timeout) keeps the rows it measured
  }
  rows_.push_back(std::move(r));
}

int reporter::failures() const {
  return static_cast<int>(std::count_if(rows_.begin(), rows_.end(), [](const row& r) {
    return r.check == check_result::failed || r.nccl.check == check_result::failed ||
           r.nvshmem.check == check_result::failed;
  }));
}

int reporter::measurement_errors() const {
  return static_cast<int>(
      std::count_if(rows_.begin(), rows_.end(), [](const row& r) { return r.status == "measurement error"; }));
}

void reporter::summary() const {
  if (!printing_) return;
  fmt::print("\n== summary\n");

  // Bandwidth: best figure per size for each op/scope (over CTA counts), NCCL beside.
  std::vector<std::string> series;
  std::map<std::uint64_t, std::map<std::string, std::string>> cells;
  std::map<std::string, std::map<std::uint64_t, double>> best;
  auto offer = [&](const std::string& name, std::uint64_t bytes, double gbs, const std::string& where) {
    if (std::isnan(gbs)) return;
    if (std::find(series.begin(), series.end(), name) == series.end()) series.push_back(name);
    auto [it, fresh] = best[name].try_emplace(bytes, gbs);
    if (fresh || gbs >= it->second) {
      it->second = gbs;
      cells[bytes][name] = fmt::format("{:.1f}{}", gbs, where);
    }
  };
  for (const row& r : rows_) {
    if (r.metric != "bandwidth" || is_collective_op(r.op)) continue;
    offer(r.op + "/" + r.scope, r.bytes, r.bandwidth_gbs, r.ctas > 1 ? fmt::format(" @{}", r.ctas) : "");
    offer("nccl send/recv", r.bytes, r.nccl.bandwidth_gbs, "");
    offer("nvshmem " + r.op, r.bytes, r.nvshmem.bandwidth_gbs, r.ctas > 1 ? fmt::format(" @{}", r.ctas) : "");
  }
  if (!series.empty()) {
    fmt::print("best GB/s per size (@ CTA count)\n{:>6}", "bytes");
    for (const auto& s : series) fmt::print(" {:>16}", s);
    fmt::print("\n");
    for (const auto& [bytes, by_series] : cells) {
      fmt::print("{:>6}", format_bytes(bytes));
      for (const auto& s : series) {
        auto it = by_series.find(s);
        fmt::print(" {:>16}", it == by_series.end() ? "-" : it->second);
      }
      fmt::print("\n");
    }
  }

  bool any_latency = false;
  for (const row& r : rows_) {
    if (r.metric != "latency") continue;
    if (!any_latency) fmt::print("\nlatency\n");
    any_latency = true;
    const std::string nvshmem =
        std::isnan(r.nvshmem.time_us) ? "" : fmt::format("  (NVSHMEM {} us)", number(r.nvshmem.time_us));
    fmt::print("  {:<22} {:<6} {:>5}  {:>8} us  {}{}\n", r.op, r.scope, r.bytes ? format_bytes(r.bytes) : "-",
               number(r.t.median_us), r.what, nvshmem);
  }
  if (info_.suite != "calibrate") coll_summary();

  int pass = 0, miss = 0, other = 0, other_pes = 0;
  for (const row& r : rows_) {
    if (r.aim == nullptr) continue;
    if (r.verdict == "pass") ++pass;
    else if (r.verdict == "miss") ++miss;
    else ++other;
    if (r.aim->pes != kAnyPes && r.aim->pes != info_.n_pes) ++other_pes;
  }
  std::string why = "failed, measurement error or no figure";
  if (info_.pes_share_gpus)
    why = "PEs share a GPU";
  else if (other_pes > 0)
    why += fmt::format("; {} are targets for {} PEs, this run has {}", other_pes, kTwoPes, info_.n_pes);
  if (pass + miss + other > 0) fmt::print("\ntargets: {} pass, {} miss, {} not judged ({})\n", pass, miss, other, why);

  const auto peers_above = std::count_if(rows_.begin(), rows_.end(),
                                         [](const row& r) { return r.nccl.above_ceiling || r.nvshmem.above_ceiling; });
  fmt::print("\n{} rows, {} FAILED checks, {} measurement errors{}\n", rows_.size(), failures(), measurement_errors(),
             peers_above > 0
                 ? fmt::format(" (and {} rows with a NCCL or NVSHMEM figure above the ceiling)", peers_above)
                 : "");
  std::fflush(stdout);
}

// Per collective: time per call and bus bandwidth for every size and mode, NCCL beside.
void reporter::coll_summary() const {
  std::vector<std::string_view> modes = {"stream", "graph", "grid", "block"};  // grid_ll too where it was run
  std::vector<std::string> ops;
  std::map<std::string, std::map<std::uint64_t, std::map<std::string, const row*>>> cells;
  for (const row& r : rows_) {
    if (!is_collective_op(r.op) || r.op == "barrier") continue;
    if (std::find(ops.begin(), ops.end(), r.op) == ops.end()) ops.push_back(r.op);
    cells[r.op][r.bytes].try_emplace(r.scope, &r);
    if (r.scope == "grid_ll" && modes.size() == 4) modes.push_back("grid_ll");
  }
  const double n = info_.n_pes;
  for (const std::string& op : ops) {
    const double factor = bus_factor(op, info_.n_pes);
    fmt::print("\n{}: us per call (bus GB/s); bus factor {:.3g} on {} PEs; NCCL under graph replay\n", op, factor, n);
    fmt::print("{:>6} {:<11}", "bytes", "algo");
    for (std::string_view m : modes) fmt::print(" {:>17}", m);
    fmt::print(" {:>17} {:>17}\n", "NCCL", "NVSHMEM stream");
    for (const auto& [bytes, by_mode] : cells.at(op)) {
      // The algorithm of the on-stream rows where there are some (a one-block row's pick can differ).
      auto shown = by_mode.find("graph");
      if (shown == by_mode.end()) shown = by_mode.find("stream");
      if (shown == by_mode.end()) shown = by_mode.begin();
      fmt::print("{:>6} {:<11}", format_bytes(bytes), shown->second->algo);
      auto cell = [&](double us, double gbs) {
        return std::isnan(us) ? std::string("-") : fmt::format("{} ({})", number(us), number(gbs * factor));
      };
      double nccl_us = kNaN, nccl_gbs = kNaN, nvshmem_us = kNaN, nvshmem_gbs = kNaN;
      for (std::string_view m : modes) {
        auto it = by_mode.find(std::string(m));
        const row* r = it == by_mode.end() ? nullptr : it->second;
        fmt::print(" {:>17}", r ? cell(r->t.median_us, r->bandwidth_gbs) : "-");
        if (r && std::isnan(nccl_us)) nccl_us = r->nccl.time_us, nccl_gbs = r->nccl.bandwidth_gbs;
        if (r && std::isnan(nvshmem_us)) nvshmem_us = r->nvshmem.time_us, nvshmem_gbs = r->nvshmem.bandwidth_gbs;
      }
      fmt::print(" {:>17} {:>17}\n", cell(nccl_us, nccl_gbs), cell(nvshmem_us, nvshmem_gbs));
    }
  }
}

}  // namespace shoal::perf
