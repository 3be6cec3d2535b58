// What the probes under tools/ share: a check of every CUDA call that names the call and stops the
// probe, and a main() that reports a shoal::error instead of terminating on it. Probes are measurement
// programs run by hand (docs/perf-notes.md), so a failed call ends the run with the reason.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "shoal/error.hpp"

#define PROBE_CUDA(call)                                                                                             \
  do {                                                                                                               \
    const cudaError_t probe_status_ = (call);                                                                        \
    if (probe_status_ != cudaSuccess) {                                                                              \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(probe_status_), __FILE__, __LINE__); \
      std::exit(1);                                                                                                  \
    }                                                                                                                \
  } while (0)

namespace shoal::probe {

// Runs the probe; a shoal::error (bad configuration, a failed bootstrap, a PE that died) is printed and
// makes the exit status 2.
inline int main_reporting_errors(int (*run)()) {
  try {
    return run();
  } catch (const shoal::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}

}  // namespace shoal::probe
