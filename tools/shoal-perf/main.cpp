// shoal-perf: shoal's benchmark harness. Runs as every PE of a job (shoalrun -n 2 -- shoal-perf p2p); PE 0
// prints the table and writes JSON Lines; all PEs take part. Exit status: 0 when every check passed (or the
// suite was skipped with a reason: too few PEs, no usable GPU), 1 when a correctness check failed, 2 when
// the run could not start or stopped on an error (bad option, CUDA, NCCL or shoal error), 3 when every check
// passed but some shoal row is a measurement error (above the ceiling: a timing that missed work).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.hpp"
#include "coll.hpp"
#include "nvshmem_peer.hpp"
#include "shoal/error.hpp"
#include "shoal/version.hpp"
#include "shoal/world.hpp"
#include "suites.hpp"

extern char** environ;

namespace shoal::perf {
namespace {

// The registry: one entry per subcommand.
constexpr suite kSuites[] = {
    {"p2p",
     "point-to-point: put/get bandwidth over sizes and CTA counts, on-stream put/get, ping-pong, "
     "fetch_add and barrier latency; NCCL send/recv and NVSHMEM's same calls beside",
     2, true, true, run_p2p},
    {"coll",
     "collectives of the world team over sizes: on-stream loop, CUDA graph replay, in-kernel grid and block "
     "scope; the model's algorithm, bus bandwidth, NCCL's same operation (and NVSHMEM's on a stream) beside",
     2, true, true, run_coll},
    {"quick", "about a minute: the headline rows of TARGETS.md with target and pass/miss; NCCL and NVSHMEM beside", 2,
     true, true, run_quick},
    {"calibrate",
     "measure the collective cost model's constants; with --calibrate FILE write the table file the "
     "library reads through SHOAL_COLL_MODEL=FILE",
     2, false, false, run_calibrate},
};

const suite& suite_named(std::string_view name) {
  for (const suite& s : kSuites)
    if (s.name == name) return s;
  throw std::logic_error("shoal-perf: no suite named " + std::string(name));
}

// --colls and --modes of the coll suite: names to values, in the order given.
template <typename T, std::size_t N>
std::vector<T> parse_names(const char* option, const std::vector<std::string>& texts, const T (&all)[N]) {
  std::vector<T> out;
  for (const std::string& text : texts) {
    const T* found = std::find_if(std::begin(all), std::end(all), [&](T v) { return text == to_string(v); });
    if (found == std::end(all)) {
      std::vector<std::string_view> known;
      for (T v : all) known.push_back(to_string(v));
      throw CLI::ValidationError(option, fmt::format("'{}' is not one of {}", text, fmt::join(known, ",")));
    }
    out.push_back(*found);
  }
  return out;
}

// NVLink multicast must never be used on the shared machines: NCCL is told before anything can start it.
void forbid_nvls() {
  const char* set = std::getenv("NCCL_NVLS_ENABLE");
  if (set != nullptr && std::string(set) != "0")
    std::fprintf(stderr, "shoal-perf: NCCL_NVLS_ENABLE=%s overridden to 0 (NVLink multicast is never used)\n", set);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const char* nvshmem = std::getenv("NVSHMEM_DISABLE_NVLS");
  if (nvshmem != nullptr && std::string(nvshmem) != "1")
    std::fprintf(stderr, "shoal-perf: NVSHMEM_DISABLE_NVLS=%s overridden to 1 (NVLink multicast is never used)\n",
                 nvshmem);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
}

// The source revision the figures belong to: SHOAL_COMMIT when set, else the one the library was built from
// (recorded at every build by cmake/write_git_commit.cmake; shoal-perf is built in the same tree).
std::string commit_of_run() {
  if (const char* env = std::getenv("SHOAL_COMMIT"); env != nullptr && *env != '\0') return env;
  if (!shoal::git_commit().empty()) return std::string(shoal::git_commit());
  return "unknown";
}

std::vector<std::uint64_t> parse_sizes(const std::vector<std::string>& texts) {
  std::vector<std::uint64_t> sizes;
  for (const std::string& t : texts) {
    std::uint64_t v = shoal::detail::parse_bytes("--sizes", t);
    if (v == 0) throw CLI::ValidationError("--sizes", "sizes must be at least 1 byte");
    sizes.push_back(v);
  }
  return sizes;
}

// The plotting script: SHOAL_PERF_PLOT_SCRIPT, else shoal-perf-plot.py next to this executable.
std::string plot_script() {
  if (const char* env = std::getenv("SHOAL_PERF_PLOT_SCRIPT"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("shoal-perf-plot.py") : (self.parent_path() / "shoal-perf-plot.py").string();
}

// Runs `python3 plot.py JSON DIR` (no shell). A missing python3 or matplotlib is reported, not fatal.
void make_plots(const std::string& json_path, const std::string& dir) {
  std::string script = plot_script();
  std::array<std::string, 4> args = {"python3", script, json_path, dir};
  std::array<char*, 5> argv = {args[0].data(), args[1].data(), args[2].data(), args[3].data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    fmt::print("plots: could not start python3 ({}); JSON is in {}\n", std::strerror(rc), json_path);
    return;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    fmt::print("plots: written to {}\n", dir);
  else
    fmt::print("plots: not written (see the message above); JSON is in {}\n", json_path);
}

int run(shoal::world& world, const suite& s, const options& opt) {
  context ctx(world, opt);
  if (ctx.n_pes < s.min_pes) {
    if (ctx.pe == 0)
      fmt::print("shoal-perf {}: skipped: needs at least {} PEs, this job has {} (run under shoalrun -n {})\n", s.name,
                 s.min_pes, ctx.n_pes, s.min_pes);
    return 0;
  }

  std::string json_path = opt.json_path;
  if (!opt.plot_dir.empty()) {
    if (ctx.pe == 0) std::filesystem::create_directories(opt.plot_dir);
    if (json_path.empty()) json_path = (std::filesystem::path(opt.plot_dir) / "shoal-perf.jsonl").string();
  }

  // Measured on every PE (the loop is collective only through its barriers); PE 0's figure is reported.
  ctx.launch_floor_us = ctx.broadcast(measure_launch_floor(ctx, opt.iters > 0 ? opt.iters : 1000), 0);

  // When PEs share a GPU the peers sit out: NCCL takes one rank per GPU and fails its set-up, and NVSHMEM
  // exits the process in its on-stream collectives unless MPS runs, and under MPS can take minutes per row.
  // Their figures would not be a link's anyway.
  const bool pes_share_gpus = ctx.machine.gpus < ctx.n_pes;
  // A peer on the same GPU is reached through its own memory: the local ceiling is the one to hold figures to.
  if (pes_share_gpus) ctx.opt.nvlink_ceiling_gbs = ctx.opt.local_ceiling_gbs;
  std::unique_ptr<nccl_peer> nccl;
  if (s.wants_nccl && opt.nccl && !pes_share_gpus) nccl = nccl_peer::open(ctx);
  ctx.nccl = nccl.get();
  std::unique_ptr<nvshmem_peer> nvshmem;
  std::string nvshmem_failure;
  if (s.wants_nvshmem && opt.nvshmem && !pes_share_gpus) {
    // NVSHMEM is only the comparison: when it cannot start, shoal's rows still run, and the table says why.
    try {
      nvshmem = nvshmem_peer::open(ctx);
    } catch (const std::exception& e) {
      nvshmem_failure = e.what();
    }
  }
  ctx.nvshmem = nvshmem.get();

  run_info info{.suite = std::string(s.name),
                .machine = ctx.machine.label,
                .date = utc_now_iso(),
                .commit = commit_of_run(),
                .shoal_version = std::string(shoal::version()),
                .nccl_version = nccl ? nccl->version() : "",
                .nvshmem_version = nvshmem ? nvshmem->version() : "",
                .n_pes = ctx.n_pes,
                .launch_floor_us = ctx.launch_floor_us,
                .warmup = opt.warmup,
                .reps = opt.reps,
                .rotate = opt.rotate,
                .quiet_each = opt.quiet_each,
                .pes_share_gpus = pes_share_gpus};
  reporter out(ctx.pe, info, json_path);
  ctx.out = &out;
  out.header();
  if (pes_share_gpus)
    out.note(
        fmt::format("{} PEs share {} GPU(s): a peer's memory is on the same GPU, so no figure here is a link's; "
                    "NCCL and NVSHMEM sit out, no target is judged, and the ceiling is local memory's",
                    ctx.n_pes, ctx.machine.gpus));
  if (!opt.nccl)
    out.note("NCCL columns off (--no-nccl)");
  else if (!nccl_peer::compiled_in() && !pes_share_gpus)
    out.note("NCCL columns empty: this build has no NCCL (configure with SHOAL_NCCL_ROOT)");
  if (s.wants_nvshmem && !opt.nvshmem)
    out.note("NVSHMEM columns off (--no-nvshmem)");
  else if (!nvshmem_failure.empty())
    out.note("NVSHMEM columns empty: NVSHMEM did not start: " + nvshmem_failure);
  else if (s.wants_nvshmem && !nvshmem_peer::compiled_in() && !pes_share_gpus)
    out.note("NVSHMEM columns empty: this build has no NVSHMEM (configure with SHOAL_NVSHMEM_ROOT)");

  s.run(ctx);
  out.summary();
  ctx.barrier();
  ctx.nccl = nullptr;
  nccl.reset();
  ctx.nvshmem = nullptr;
  nvshmem.reset();

  if (ctx.pe == 0 && !opt.plot_dir.empty()) make_plots(json_path, opt.plot_dir);
  if (out.failures() > 0) return 1;
  // PE 0's rows are the table and the JSON: only they are judged against the ceiling as printed (the
  // other PEs' copies of a row may hold their own timings).
  return ctx.pe == 0 && out.measurement_errors() > 0 ? 3 : 0;
}

}  // namespace
}  // namespace shoal::perf

int main(int argc, char** argv) {
  using namespace shoal::perf;
  forbid_nvls();

  options opt;
  std::vector<std::string> size_texts, coll_texts, mode_texts;
  bool no_nccl = false, no_nvshmem = false, no_check = false, no_rotate = false;
  coll_options& coll_opt = coll_settings();
  CLI::App app{
      "shoal-perf: shoal's benchmarks, one suite per subcommand. Run every PE under the launcher:\n"
      "  shoalrun -n 2 -- shoal-perf p2p --json p2p.jsonl\n"
      "  shoalrun -n 2 -- shoal-perf --calibrate coll-model.txt   (the calibrate suite)"};
  app.require_subcommand(0, 1);
  app.fallthrough();  // options may come before or after the suite's name
  app.add_option("--json", opt.json_path, "write one JSON object per row (JSON Lines) to this file");
  app.add_option("--plot", opt.plot_dir,
                 "after the run, write PNG plots to this directory (needs python3 + matplotlib)");
  app.add_option("--iters", opt.iters, "operations per timed batch (0: chosen per size)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", opt.warmup, "untimed batches before the timed ones")->check(CLI::NonNegativeNumber);
  app.add_option("--reps", opt.reps, "timed batches; rows report their median, p10 and p90")
      ->check(CLI::PositiveNumber);
  app.add_option("--sizes", size_texts, "message sizes, e.g. 8,4K,1M,1G (binary units)")->delimiter(',');
  app.add_option("--ctas", opt.ctas, "CTA counts for block-scope sweeps, e.g. 1,16,132")
      ->delimiter(',')
      ->check(CLI::Range(1, 65535));
  app.add_option("--threads", opt.threads, "threads per CTA for block-scope RMA")->check(CLI::Range(32, 1024));
  app.add_option("--nvlink-ceiling", opt.nvlink_ceiling_gbs,
                 "GB/s above which a remote figure is a measurement error; the default, 400, is the fastest "
                 "transfer measured on 2 x H200 NV18 (copy engine, 396 GB/s) rounded up, not the links' nominal "
                 "450: set it for another machine");
  app.add_option("--local-ceiling", opt.local_ceiling_gbs, "GB/s above which a local figure is a measurement error");
  app.add_flag("--no-nccl", no_nccl, "do not run NCCL side by side");
  app.add_flag("--no-nvshmem", no_nvshmem, "do not run NVSHMEM side by side");
  app.add_flag("--no-check", no_check, "skip the correctness checks after timing");
  app.add_flag("--no-rotate", no_rotate, "use one buffer slot per size (L2 may serve repeats)");
  std::string quiet_mode = "end";
  app.add_option("--quiet", quiet_mode,
                 "device put/get bandwidth: 'end' = messages back to back, one quiet per kernel (as NVSHMEM's "
                 "perftest); 'each' = quiet after every message (latency-bound)")
      ->check(CLI::IsMember({"end", "each"}));
  app.add_option("--calibrate", coll_opt.calibrate_path,
                 "measure the collective cost model's constants and write them to this table file (runs the "
                 "calibrate suite; the library reads the file through SHOAL_COLL_MODEL=FILE)");
  const shoal::perf::suite* chosen = nullptr;
  for (const suite& s : kSuites) {
    CLI::App* sub = app.add_subcommand(std::string(s.name), std::string(s.summary));
    sub->fallthrough();
    sub->callback([&chosen, &s] { chosen = &s; });
  }
  CLI::App* coll = app.get_subcommand("coll");
  coll->add_option("--colls", coll_texts,
                   "collectives to run, e.g. reduce,alltoall (default: reduce,reducescatter,fcollect,alltoall,"
                   "broadcast,barrier)")
      ->delimiter(',');
  coll->add_option(
          "--modes", mode_texts,
          "ways to call them: stream (on-stream loop), graph (CUDA graph replay), grid, block (back-to-back "
          "calls in one kernel), grid_ll (grid with shoal::ll_only; not in the default); default: stream,graph,"
          "grid,block")
      ->delimiter(',');
  coll->footer(
      "Sizes: --sizes (default 4,16,...,1G in powers of 4, capped by free heap). bytes = OpenSHMEM's nelems x element "
      "size: reduce and broadcast the buffer, fcollect each PE's contribution, alltoall one block, reducescatter each "
      "PE's result block. Reductions are bfloat16 sum. Timing options (--iters, --warmup, --reps, --no-nccl, "
      "--no-check, --no-rotate, --json, --plot) are shoal-perf's; see shoal-perf --help.");
  try {
    app.parse(argc, argv);
    opt.sizes = parse_sizes(size_texts);
    coll_opt.colls = parse_names("--colls", coll_texts, kCollOrder);
    coll_opt.modes = parse_names("--modes", mode_texts, kCollAllModes);
    if (chosen == nullptr && coll_opt.calibrate_path.empty())
      throw CLI::RequiredError("a suite (p2p, coll, quick, calibrate) or --calibrate FILE");
    if (chosen == nullptr) chosen = &suite_named("calibrate");
    if (!coll_opt.calibrate_path.empty() && chosen->name != "calibrate")
      throw CLI::ValidationError("--calibrate", "it runs the calibrate suite, not " + std::string(chosen->name));
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const shoal::error& e) {
    std::fprintf(stderr, "shoal-perf: %s\n", e.what());
    return 2;
  }
  opt.nccl = !no_nccl;
  opt.nvshmem = !no_nvshmem;
  opt.check = !no_check;
  opt.rotate = !no_rotate;
  opt.quiet_each = quiet_mode == "each";

  std::unique_ptr<shoal::world> world;
  try {
    world = std::make_unique<shoal::world>(shoal::init());
  } catch (const shoal::error& e) {
    // A machine without a usable GPU cannot run any suite: a skip with the reason, as for too few PEs.
    if (e.category() == shoal::errc::unsupported) {
      std::printf("shoal-perf %s: skipped: cannot run here: %s\n", std::string(chosen->name).c_str(), e.what());
      return 0;
    }
    std::fprintf(stderr, "shoal-perf: cannot start: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shoal-perf: cannot start: %s\n", e.what());
    return 2;
  }
  try {
    return run(*world, *chosen, opt);
  } catch (const std::exception& e) {
    // The other PEs may be waiting in a collective: leave without the world's collective teardown; the
    // launcher stops the rest of the job.
    std::fprintf(stderr, "shoal-perf: pe %d: error: %s\n", world->pe(), e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(2);
  }
}
