// The random mix of the proxy engine tests, shared by the one-process tests over the loopback network
// (test_proxy_engine.cpp) and the multi-process tests over UCX (tests/mp/proxy_over_ucx_tests.cpp): the
// heap layout every PE uses, and the model of one atomic that the producers check results against.
#pragma once

#include <cstdint>
#include <cstring>

#include "transport/proxy_descriptor.hpp"

namespace shoal::detail::engine_test {

// Heap of every PE: two shared counters, then one slice per producer of the job (only that producer
// writes it, on every PE, so its model is exact), then each local producer's arenas for put sources and
// get destinations.
constexpr int kProducers = 2;  // per PE
constexpr std::uint64_t kCounter32 = 0;
constexpr std::uint64_t kCounter64 = 8;
constexpr std::uint64_t kCounter64Start = (std::uint64_t{1} << 40) - 3;
constexpr std::uint64_t kSlicesBase = 64;
constexpr std::uint64_t kSliceData = 20000;
constexpr std::uint64_t kSignals = kSliceData;  // 4 signal words
constexpr std::uint64_t kAtomics = kSliceData + 32;
constexpr std::uint64_t kSliceBytes = kSliceData + 64;
constexpr std::uint64_t kArenaBytes = 48 * 1024;

inline std::uint64_t atomic_offset(proxy_atomic_type t) {
  switch (t) {
    case proxy_atomic_type::int32:
      return kAtomics;
    case proxy_atomic_type::float32:
      return kAtomics + 4;
    case proxy_atomic_type::int64:
      return kAtomics + 8;
    case proxy_atomic_type::float64:
      return kAtomics + 16;
  }
  return kAtomics;
}

struct mix_layout {
  int n_pes;
  std::uint64_t slice(int pe, int producer) const {
    return kSlicesBase + std::uint64_t(pe * kProducers + producer) * kSliceBytes;
  }
  std::uint64_t arenas() const { return kSlicesBase + std::uint64_t(n_pes * kProducers) * kSliceBytes; }
  std::uint64_t source_arena(int producer) const { return arenas() + std::uint64_t(producer) * 2 * kArenaBytes; }
  std::uint64_t get_arena(int producer) const { return source_arena(producer) + kArenaBytes; }
  std::uint64_t heap_bytes() const { return arenas() + kProducers * 2 * kArenaBytes; }
};

// The model of one atomic: independent of host_atomic_apply on purpose. Returns the old value.
inline std::uint64_t model_atomic(std::byte* word, proxy_atomic_op op, unsigned width, std::uint64_t value,
                           std::uint64_t compare) {
  std::uint64_t old = 0;
  std::memcpy(&old, word, width);
  const std::uint64_t mask = width == 4 ? 0xffffffffull : ~0ull;
  std::uint64_t next = old;
  switch (op) {
    case proxy_atomic_op::fetch:
      break;
    case proxy_atomic_op::set:
    case proxy_atomic_op::swap:
      next = value;
      break;
    case proxy_atomic_op::compare_swap:
      if (old == compare) next = value;
      break;
    case proxy_atomic_op::fetch_add:
    case proxy_atomic_op::add:
      next = (old + value) & mask;
      break;
    case proxy_atomic_op::fetch_and:
    case proxy_atomic_op::bit_and:
      next = old & value;
      break;
    case proxy_atomic_op::fetch_or:
    case proxy_atomic_op::bit_or:
      next = old | value;
      break;
    case proxy_atomic_op::fetch_xor:
    case proxy_atomic_op::bit_xor:
      next = old ^ value;
      break;
  }
  std::memcpy(word, &next, width);
  return old;
}

}  // namespace shoal::detail::engine_test
