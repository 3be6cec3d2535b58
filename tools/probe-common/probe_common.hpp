// What the probes under tools/ share: a check of every CUDA call that names the call and stops the
// probe, and a main() that reports a shoal::error instead of terminating on it. Probes are measurement
// programs run by hand (docs/perf-notes.md), so a failed call ends the run with the reason.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "shoal/error.hpp"

namespace shoal::probe {

// What went wrong in a runtime or a driver call, or null when it succeeded.
inline const char* error_text(cudaError_t status) {
  return status == cudaSuccess ? nullptr : cudaGetErrorString(status);
}
inline const char* error_text(CUresult status) {
  if (status == CUDA_SUCCESS) return nullptr;
  const char* text = "unknown driver error";
  cuGetErrorString(status, &text);
  return text;
}

// Runs the probe; a shoal::error (bad configuration, a failed bootstrap, a PE that died) is printed and
// makes the exit status 2.
template <typename Run>  // any callable returning the exit status
int main_reporting_errors(Run&& run) {
  try {
    return run();
  } catch (const shoal::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}

// The median of a probe's repeated figures (the upper one of an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace shoal::probe

// Checks a CUDA runtime call (cudaError_t) or driver call (CUresult); a failure ends the probe.
#define PROBE_CUDA(call)                                                                        \
  do {                                                                                          \
    if (const char* probe_error_ = shoal::probe::error_text(call)) {                            \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, probe_error_, __FILE__, __LINE__); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)
