// shoalrun: starts the N processes (PEs) of one shoal job on this host. See --help for the contract.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "base/config.hpp"
#include "launcher.hpp"
#include "shoal/error.hpp"

namespace {

using namespace shoal::launcher;

constexpr double kMaxTimeoutSeconds = 1e8;  // keeps the deadline arithmetic far from overflow

constexpr std::string_view kFooter =
    R"(Each process gets SHOAL_RANK, SHOAL_WORLD_SIZE, SHOAL_LOCAL_RANK, SHOAL_LOCAL_SIZE,
SHOAL_BOOTSTRAP_ADDR (127.0.0.1:port, already listening) and SHOAL_BOOTSTRAP_SECRET (fresh per job);
rank 0 also gets SHOAL_BOOTSTRAP_LISTEN_FD, the listening socket itself. NCCL_NVLS_ENABLE=0,
NVSHMEM_DISABLE_NVLS=1 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are always set. Every line a process
writes is prefixed with "[rank] " (stdout to stdout, stderr to stderr). Only rank 0 reads stdin:
shoalrun passes its own stdin on to rank 0 through a pipe; the others read an empty stdin.

shoalrun starts the PEs of one host. Across nodes, start one PE per GPU with your cluster's launcher,
which shoal::init recognises: under Slurm, export SHOAL_BOOTSTRAP_ADDR=<first node>:<port> and run
`srun --ntasks-per-node <GPUs> ./app`; under Open MPI, the same address and `mpirun -n <PEs> ./app`, or
no address with an MPI program that passes its communicator (shoal::make_mpi_bootstrap). Keep
CUDA_MODULE_LOADING=EAGER in their environment (docs/getting-started.md, "Across nodes").

When a process fails (non-zero exit or killed by a signal), the others get SIGTERM, then SIGKILL 2 s
later. SIGINT and SIGTERM sent to shoalrun are forwarded to all processes; a second one kills them.
A stop (Ctrl-Z, SIGTSTP) stops them with shoalrun, and continuing shoalrun (fg, bg) continues them; time
spent stopped counts against --timeout. Each process runs in a process group of its own and these
signals go to the groups, so they also reach what the processes started, an ended process's included.
What is left in the groups when the last process ends is killed: SIGKILL after a failure, a timeout or
a signal, SIGTERM after a job that succeeded.

Exit status:
  0        every process exited with status 0
  1..255   the exit status of the first process that failed, or 128+N if it was killed by signal N
  124      --timeout expired (the ranks still running are named)
  128+N    shoalrun received signal N (SIGINT, SIGTERM) and stopped the job
  2        usage error (bad option, missing or non-executable program); nothing was started
  1        shoalrun could not start the job (system error))";

int usage_failure(std::string_view message) {
  fmt::print(stderr, "shoalrun: {}\nRun 'shoalrun --help' for usage.\n", message);
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "shoalrun -n N [--timeout S] [--verbose] [--] program [args...]\n"
      "Starts N local processes of one shoal job, relays their output, stops them all if one fails.",
      "shoalrun"};
  // Parsing stops at the program: everything from it on belongs to the program.
  app.prefix_command();
  app.footer(std::string(kFooter));

  job_options options;
  std::string timeout_text;
  app.add_option("-n,--np", options.num_procs, "Number of processes (PEs) to start, 1.." + std::to_string(kMaxProcs))
      ->required()
      ->check(CLI::Range(1, kMaxProcs));
  app.add_option("--timeout", timeout_text,
                 "Bound on the whole run, e.g. 30, 2.5, 500ms, 5m; on expiry all are stopped, exit 124. "
                 "0: no bound (default)");
  app.add_flag("-v,--verbose", options.verbose, "Report each process's pid and exit status");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
    return usage_failure(e.what());
  }

  options.command = app.remaining();
  // With prefix_command, remaining() keeps a leading "--" and also collects unknown options of shoalrun.
  // A word starting with '-' is the program only right after "--".
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  } else if (!options.command.empty() && options.command.front().starts_with('-')) {
    return usage_failure(fmt::format("unknown option '{}'", options.command.front()));
  }
  if (options.command.empty()) return usage_failure("no program given");

  if (!timeout_text.empty()) {
    try {
      double seconds = shoal::detail::parse_seconds("--timeout", timeout_text);
      if (seconds > kMaxTimeoutSeconds) return usage_failure(fmt::format("--timeout {} is too long", timeout_text));
      if (seconds > 0) options.timeout_seconds = seconds;
    } catch (const shoal::error& e) {
      return usage_failure(fmt::format("--timeout: {}", e.detail()));
    }
  }

  try {
    return run_job(options);
  } catch (const usage_error& e) {
    return usage_failure(e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "shoalrun: {}\n", e.what());
    return kExitInternal;
  }
}
