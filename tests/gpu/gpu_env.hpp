// Shared set-up of the GPU tier: one shoal::world per process for the whole run (init is collective),
// random data helpers and a guarded comparison against a host reference.
// Every PE runs the same tests in the same order (no shuffling), so collective calls line up.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "shoal/shoal.hpp"

namespace shoal::gpu_test {

// The world of this process, or null when there is no GPU (tests skip with the reason).
shoal::world* the_world();
const std::string& skip_reason();

#define SHOAL_REQUIRE_WORLD(min_pes)                                                                     \
  do {                                                                                                   \
    if (::shoal::gpu_test::the_world() == nullptr) GTEST_SKIP() << ::shoal::gpu_test::skip_reason();     \
    if (::shoal::gpu_test::the_world()->n_pes() < (min_pes))                                             \
      GTEST_SKIP() << "needs " << (min_pes) << " PEs, have " << ::shoal::gpu_test::the_world()->n_pes(); \
  } while (0)

// For tests of what only load/store reach gives (peer addresses, registered user buffers, copy engines
// between GPUs): skipped with the reason when some PE is on another node (SHOAL_EMULATE_NODES, or a
// job across hosts), where calls go through the proxy instead.
#define SHOAL_REQUIRE_ONE_NODE()                                                                        \
  do {                                                                                                  \
    if (::shoal::gpu_test::the_world()->bootstrap().n_nodes() > 1)                                      \
      GTEST_SKIP() << "needs every PE on one node (load/store reach); this job has "                     \
                   << ::shoal::gpu_test::the_world()->bootstrap().n_nodes() << " nodes";                \
  } while (0)

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

// Deterministic random bytes: the same (seed, n) gives the same bytes on every PE, so a receiver can
// recompute what a sender sent.
inline std::vector<std::uint8_t> random_bytes(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 12345);
  std::vector<std::uint8_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(rng() >> 56);
  return out;
}

inline std::vector<std::uint8_t> download(const void* device_ptr, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  if (n != 0 && cudaMemcpy(out.data(), device_ptr, n, cudaMemcpyDeviceToHost) != cudaSuccess)
    throw std::runtime_error("cudaMemcpy device to host failed");
  return out;
}

// Returns once the bytes are in device memory. cudaMemcpy from pageable memory may return before its DMA
// has landed, and a peer that reads this PE's memory right after a host barrier would see what was there.
inline void upload(void* device_ptr, const std::vector<std::uint8_t>& bytes) {
  if (!bytes.empty() && cudaMemcpy(device_ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess)
    throw std::runtime_error("cudaMemcpy host to device failed");
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("cudaDeviceSynchronize failed");
}

// First index where two byte vectors differ, or -1.
inline long long first_mismatch(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i]) return static_cast<long long>(i);
  return a.size() == b.size() ? -1 : static_cast<long long>(std::min(a.size(), b.size()));
}

inline int next_pe(const shoal::world& w) { return (w.pe() + 1) % w.n_pes(); }
inline int prev_pe(const shoal::world& w) { return (w.pe() + w.n_pes() - 1) % w.n_pes(); }

}  // namespace shoal::gpu_test
