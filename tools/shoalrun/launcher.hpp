// Process management of shoalrun: starts the ranks of one job on this host, relays their output, and
// stops the whole job when one rank fails, when the timeout expires or when shoalrun is signalled.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace shoal::launcher {

// Exit codes of shoalrun itself (a failing rank's own code is passed through; see main.cpp's --help).
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitTimeout = 124;
inline constexpr int kExitSignalBase = 128;

inline constexpr int kMaxProcs = 1024;

// A mistake on shoalrun's command line; reported before anything is started.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct job_options {
  int num_procs = 1;
  std::vector<std::string> command;       // program (as given) and its arguments
  std::optional<double> timeout_seconds;  // bound on the whole run; empty: no bound
  bool verbose = false;
};

// Resolves `program` the way execvp would (through PATH unless it contains '/'), to an executable
// regular file. Throws usage_error with a message naming the program otherwise.
std::string resolve_program(const std::string& program);

// Runs the job to its end and returns shoalrun's exit code. Throws usage_error (nothing started) when
// the program cannot be resolved. Everything started is stopped and reaped before it returns.
int run_job(const job_options& options);

}  // namespace shoal::launcher
