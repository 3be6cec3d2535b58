// The GPU's global timer, for figures timed inside a kernel.
#pragma once

#include <cstdint>

namespace shoal::perf {

// Nanoseconds of %globaltimer: the same clock on every SM of a GPU.
__device__ inline std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace shoal::perf
