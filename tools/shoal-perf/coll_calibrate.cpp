// `shoal-perf calibrate` (or `shoal-perf --calibrate FILE`): measures the constants of the collectives'
// cost model (shoal::coll_model_table) on this machine and writes them as a table file, which the library
// reads through SHOAL_COLL_MODEL=FILE. Each constant comes from the calls that isolate it, made inside one
// kernel at grid scope with the algorithm forced (team_handle::with_algorithm), so launch time is not in
// them; the model's formulas (coll_cost_terms) take the other terms out. It then runs every algorithm of
// all-reduce and fcollect over sizes and prints where the calibrated model would not pick the fastest.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>

#include "coll.hpp"
#include "coll/cost_model.hpp"  // format_coll_model: the table file's text
#include "suites.hpp"

namespace shoal::perf {

namespace {

constexpr std::uint64_t kTiny = 16;                   // bytes of the latency calls: 8 bfloat16
// LL rate: 1 MiB is 8 KiB of payload (one full LL step, 16 KiB of lines) on each of 128 CTAs, so the
// per-SM store rate shows; at 256 KiB the lines of 2 KiB per CTA hide under the step's latency.
constexpr std::uint64_t kLlRateBytes = 1ull << 20;
constexpr std::uint64_t kLargeBytes = 256ull << 20;
constexpr double kSlowerThanBest = 1.10;  // a model choice this much slower than the best is reported

double median(std::vector<double> v) {
  std::erase_if(v, [](double x) { return !(x > 0) || !std::isfinite(x); });
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Rounded so the table file reads well: 3 significant digits.
double round3(double v) {
  if (!(v > 0)) return v;
  const double scale = std::pow(10.0, 2 - std::floor(std::log10(v)));
  return std::round(v * scale) / scale;
}

constexpr double kBytesPerUsPerGbps = 1e3;

}  // namespace

void run_calibrate(context& ctx) {
  reporter& out = *ctx.out;
  const int n = ctx.n_pes;
  const std::string& path = coll_settings().calibrate_path;

  // A file PE 0 cannot write fails the run now, not after the measurements.
  std::uint64_t writable = 1;
  if (ctx.pe == 0 && !path.empty()) writable = std::ofstream(path, std::ios::app) ? 1 : 0;
  if (ctx.broadcast(writable, 0) == 0)
    throw std::runtime_error(fmt::format("cannot write --calibrate file '{}'", path));

  // The largest size whose alltoall buffers fit the heap (alltoall's are the largest, n x bytes).
  const std::uint64_t room = coll_heap_room(ctx);
  std::uint64_t large = kLargeBytes;
  while (large > (16ull << 20) && coll_arenas_bytes(ctx, coll_buffer_bytes(collective::alltoall, large, n)) > room)
    large /= 4;
  ctx.reserve(coll_buffer_bytes(collective::alltoall, large, n));

  auto forced = [&](collective op, std::uint64_t bytes, algorithm algo) {
    const coll_case c{.op = op, .bytes = bytes, .mode = coll_mode::grid, .force = algo};
    const coll_result r = measure_coll(ctx, c);
    out.add(coll_row(ctx, c, r));
    return r.m.t.median_us;
  };

  out.section("calibrate: the cost model's constants (in-kernel calls, grid scope, forced algorithms)", false,
              table_layout::coll);
  coll_model_table table;  // chunk_bytes stays the implementation's
  table.launch_us = ctx.launch_floor_us;

  // gamma: local HBM traffic (bytes read + written) of a device-to-device copy.
  const measurement copy = measure_local_copy(ctx, large);
  row copy_row;
  copy_row.op = "local_copy";
  copy_row.scope = "stream";
  copy_row.algo = "memcpy_d2d";
  copy_row.metric = "bandwidth";
  copy_row.what = "per copy; GB/s of bytes copied (read + written is twice that)";
  copy_row.from_pe = copy_row.to_pe = -1;
  copy_row.bytes = large;
  copy_row.ops = copy.ops;
  copy_row.t = copy.t;
  copy_row.bandwidth_gbs = gbs(large, copy.t.median_us);
  copy_row.ceiling_gbs = ctx.opt.local_ceiling_gbs;
  copy_row.note = copy.note;
  out.add(copy_row);
  const double gamma = 2 * gbs(large, copy.t.median_us);

  // alpha_ll and alpha: tiny calls, where the byte terms are below a nanosecond.
  const double ll_tiny = forced(collective::reduce, kTiny, algorithm::ll);
  const double one_shot_tiny = forced(collective::reduce, kTiny, algorithm::one_shot);
  const double two_shot_tiny = forced(collective::reduce, kTiny, algorithm::two_shot);
  const double direct_tiny = forced(collective::fcollect, kTiny, algorithm::direct);
  const coll_case barrier_case{.op = collective::barrier, .bytes = 0, .mode = coll_mode::block, .force = std::nullopt};
  const coll_result barrier = measure_coll(ctx, barrier_case);
  out.add(coll_row(ctx, barrier_case, barrier));
  const double alpha_ll = ll_tiny, alpha = one_shot_tiny;

  // beta: large calls; each estimate takes the model's step and local terms out of the measured time.
  auto link_estimate = [&](collective op, algorithm algo, std::uint64_t bytes, double us, double step,
                           double link_gamma) {
    const cost_terms terms = coll_cost_terms(op, algo, n, bytes);
    const double rest = us - terms.steps * step - terms.local_bytes / (link_gamma * kBytesPerUsPerGbps);
    return rest > 0 ? terms.remote_bytes / rest / kBytesPerUsPerGbps : kNaN;
  };
  const std::pair<collective, algorithm> kLinkCalls[] = {{collective::fcollect, algorithm::direct},
                                                         {collective::alltoall, algorithm::direct},
                                                         {collective::reduce, algorithm::two_shot}};
  std::vector<double> links;
  std::string link_text;
  for (auto [op, algo] : kLinkCalls) {
    const double us = forced(op, large, algo);
    links.push_back(link_estimate(op, algo, large, us, alpha, gamma));
    link_text +=
        fmt::format("{}{} {}: {:.0f}", link_text.empty() ? "" : ", ", coll_name(op), to_string(algo), links.back());
  }
  // beta_ll: LL calls of many lines (kLlRateBytes: one LL step per CTA at the on-stream CTA count).
  std::vector<double> ll_links;
  std::string ll_text;
  for (collective op : {collective::reduce, collective::fcollect}) {
    const double us = forced(op, kLlRateBytes, algorithm::ll);
    ll_links.push_back(link_estimate(op, algorithm::ll, kLlRateBytes, us, alpha_ll, gamma));
    ll_text += fmt::format("{}{}: {:.0f}", ll_text.empty() ? "" : ", ", coll_name(op), ll_links.back());
  }

  auto keep = [&](double& field, double value, const char* what) {
    if (std::isfinite(value) && value > 0)
      field = round3(value);
    else
      out.note(fmt::format("{}: no usable measurement; keeping {}", what, field));
  };
  keep(table.launch_us, ctx.launch_floor_us, "launch_us");
  keep(table.step_us, alpha, "step_us");
  keep(table.ll_step_us, alpha_ll, "ll_step_us");
  keep(table.link_gbps, median(links), "link_gbps");
  keep(table.ll_link_gbps, median(ll_links), "ll_link_gbps");
  keep(table.local_gbps, gamma, "local_gbps");

  out.note(fmt::format("launch_us    = {:<8} launch floor (empty kernels back to back)", table.launch_us));
  out.note(
      fmt::format("step_us      = {:<8} one_shot reduce of {} B per call (1 step); cross-checks: two_shot / 2 = "
                  "{:.2f}, fcollect direct / 2 = {:.2f}, block barrier = {:.2f}",
                  table.step_us, kTiny, two_shot_tiny / 2, direct_tiny / 2, barrier.m.t.median_us));
  out.note(fmt::format("ll_step_us   = {:<8} ll reduce of {} B per call", table.ll_step_us, kTiny));
  out.note(fmt::format("link_gbps    = {:<8} median of {} at {}", table.link_gbps, link_text, format_bytes(large)));
  out.note(fmt::format("ll_link_gbps = {:<8} median of ll {} at {}", table.ll_link_gbps, ll_text,
                       format_bytes(kLlRateBytes)));
  out.note(fmt::format("local_gbps   = {:<8} device-to-device copy of {}, bytes read + written", table.local_gbps,
                       format_bytes(large)));

  // Does the calibrated model pick the fastest algorithm? Every algorithm, forced, over sizes.
  out.section("calibrate: every algorithm of reduce and fcollect, forced (in-kernel, grid scope)", false,
              table_layout::coll);
  std::vector<std::string> findings;
  for (collective op : {collective::reduce, collective::fcollect}) {
    for (std::uint64_t bytes = 256; bytes <= std::min<std::uint64_t>(large / 4, 64ull << 20); bytes *= 4) {
      std::map<algorithm, double> times;
      for (int a = 0; a < kAlgorithmCount; ++a)
        if (supports(op, algorithm(a))) times[algorithm(a)] = forced(op, bytes, algorithm(a));
      const algorithm choice = model_choice(table, op, n, bytes);
      const auto best =
          std::min_element(times.begin(), times.end(), [](auto& x, auto& y) { return x.second < y.second; });
      const auto chosen = times.find(choice);
      std::string line = fmt::format("{} {}: model picks {} (predicted {:.2f} us)", coll_name(op), format_bytes(bytes),
                                     to_string(choice), predict_us(table, op, choice, n, bytes));
      for (const auto& [algo, us] : times) line += fmt::format(", {} {:.2f}", to_string(algo), us);
      if (chosen == times.end() || chosen->second > kSlowerThanBest * best->second) {
        line += fmt::format("  <- {} is faster", to_string(best->first));
        findings.push_back(line);
      }
      out.note(line);
    }
  }
  if (findings.empty())
    out.note(fmt::format("the calibrated model's choice is within {:.0f}% of the fastest algorithm at every size",
                         (kSlowerThanBest - 1) * 100));
  else
    out.note(
        fmt::format("{} sizes where the model's choice is more than {:.0f}% slower than another algorithm: a "
                    "formula to fix, not a constant to tune",
                    findings.size(), (kSlowerThanBest - 1) * 100));

  const run_info& info = out.info();
  const std::string text = fmt::format(
      "# shoal collective cost model: {}, {} PEs (shoal-perf --calibrate, {}, commit {})\n"
      "# in-kernel calls at grid scope with forced algorithms; see docs/benchmarks.md. Use: SHOAL_COLL_MODEL=<this "
      "file>\n{}",
      info.machine, info.n_pes, info.date, info.commit, detail::format_coll_model(table));
  if (ctx.pe == 0) {
    fmt::print("\n== calibrate: table file\n{}", text);
    if (!path.empty()) {
      std::ofstream file(path, std::ios::trunc);
      file << text;
      if (!file.flush()) throw std::runtime_error(fmt::format("cannot write --calibrate file '{}'", path));
      fmt::print("written to {}; the library reads it with SHOAL_COLL_MODEL={}\n", path, path);
    } else {
      fmt::print("no file written (give --calibrate FILE)\n");
    }
    std::fflush(stdout);
  }
}

}  // namespace shoal::perf
