// Remote atomics under contention: every thread of every PE hammers the same words on PE 0; the final
// values must be exact. Host-initiated atomics are checked against a sequential model.
#include <algorithm>
#include <cstring>
#include <vector>

#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

constexpr int kBlocks = 8, kThreads = 128, kIters = 16;
// A PE that reaches PE 0 only through the proxy (another node) pays a network round trip per atomic, and its
// compare-and-swap loop loses most races to PEs that reach the word directly (each round through the proxy
// settles one of its threads): it runs one iteration.
constexpr int kProxiedIters = 1;
constexpr unsigned kThreadsPerPe = kBlocks * kThreads;

struct counters {
  unsigned long long add, inc, cas, bits_or, bits_xor, bits_and, swap;
  int add32;
  unsigned inc32;
  float fadd;
  double dadd;
};

__global__ void contention_kernel(device_handle h, counters* c, unsigned long long* swapped, int iters) {
  const int pe0 = 0;
  unsigned global = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < iters; ++i) {
    atomic_add(h, &c->add, 3ull, pe0);
    atomic_fetch_inc(h, &c->inc, pe0);
    atomic_add(h, &c->add32, 1, pe0);
    atomic_inc(h, &c->inc32, pe0);
    atomic_add(h, &c->fadd, 1.0f, pe0);
    atomic_fetch_add(h, &c->dadd, 0.5, pe0);
    // An increment by compare-and-swap loop: exact only if compare_swap is atomic.
    unsigned long long seen = atomic_fetch(h, &c->cas, pe0);
    for (;;) {
      unsigned long long previous = atomic_compare_swap(h, &c->cas, seen, seen + 1, pe0);
      if (previous == seen) break;
      seen = previous;
    }
  }
  unsigned long long bit = 1ull << ((global + h.pe * 7) % 64);
  atomic_or(h, &c->bits_or, bit, pe0);
  atomic_fetch_xor(h, &c->bits_xor, bit, pe0);  // twice: every bit flips back
  atomic_xor(h, &c->bits_xor, bit, pe0);
  atomic_fetch_and(h, &c->bits_and, ~(1ull << (h.pe % 64)), pe0);
  // Every thread swaps in a unique id; the returned values plus the final value must be exactly the
  // initial value and all ids.
  swapped[global] = atomic_swap(h, &c->swap, 1000ull + h.pe * kThreadsPerPe + global, pe0);
}

TEST(Atomics, ContentionFromAllThreadsOfAllPes) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  auto* c = static_cast<counters*>(w.calloc(1, sizeof(counters)));
  counters initial{};
  initial.bits_and = ~0ull;
  initial.swap = 7;
  if (w.pe() == 0) ASSERT_EQ(cudaMemcpy(c, &initial, sizeof(counters), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // landed before peers' atomics (see upload())
  unsigned long long* swapped = nullptr;
  ASSERT_EQ(cudaMalloc(&swapped, kThreadsPerPe * sizeof(unsigned long long)), cudaSuccess);
  const int iters = w.ptr(c, 0) != nullptr ? kIters : kProxiedIters;
  std::vector<int> iters_of(w.n_pes());
  w.bootstrap().all_gather(&iters, iters_of.data(), sizeof iters);
  barrier_all(w);
  contention_kernel<<<kBlocks, kThreads>>>(w.device_handle(), c, swapped, iters);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  barrier_all(w);

  std::vector<unsigned long long> mine(kThreadsPerPe), all(kThreadsPerPe * w.n_pes());
  ASSERT_EQ(cudaMemcpy(mine.data(), swapped, mine.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  w.bootstrap().all_gather(mine.data(), all.data(), mine.size() * 8);
  if (w.pe() == 0) {
    counters got{};
    ASSERT_EQ(cudaMemcpy(&got, c, sizeof(counters), cudaMemcpyDeviceToHost), cudaSuccess);
    unsigned long long ops = 0;
    for (const int n : iters_of) ops += 1ull * kThreadsPerPe * unsigned(n);
    EXPECT_EQ(got.add, 3 * ops);
    EXPECT_EQ(got.inc, ops);
    EXPECT_EQ(got.cas, ops);
    EXPECT_EQ(got.add32, int(ops));
    EXPECT_EQ(got.inc32, unsigned(ops));
    EXPECT_EQ(got.fadd, float(ops));  // exact: ops < 2^24
    EXPECT_EQ(got.dadd, 0.5 * double(ops));
    unsigned long long want_or = 0, want_and = ~0ull;
    for (int pe = 0; pe < w.n_pes(); ++pe) {
      for (unsigned t = 0; t < kThreadsPerPe; ++t) want_or |= 1ull << ((t + pe * 7) % 64);
      want_and &= ~(1ull << (pe % 64));
    }
    EXPECT_EQ(got.bits_or, want_or);
    EXPECT_EQ(got.bits_xor, 0ull);
    EXPECT_EQ(got.bits_and, want_and);
    all.push_back(got.swap);
    std::vector<unsigned long long> want{7};
    for (int pe = 0; pe < w.n_pes(); ++pe)
      for (unsigned t = 0; t < kThreadsPerPe; ++t) want.push_back(1000ull + pe * kThreadsPerPe + t);
    std::sort(all.begin(), all.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(all, want) << "swap lost or duplicated a value";
  }
  barrier_all(w);
  cudaFree(swapped);
  w.free(c);
}

// Host-initiated atomics, PE by PE in turn against the next PE's words, against a sequential model.
TEST(Atomics, HostFormsMatchModel) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  auto* i64 = static_cast<long long*>(w.calloc(4, sizeof(long long)));
  auto* u32 = static_cast<unsigned*>(w.calloc(4, sizeof(unsigned)));
  auto* f64 = static_cast<double*>(w.calloc(2, sizeof(double)));
  int target = next_pe(w);
  for (int turn = 0; turn < w.n_pes(); ++turn) {
    if (turn == w.pe()) {
      // Model of the target's words, which only this PE touches during its turn... after earlier turns'
      // PEs touched other targets. Each PE's target is distinct, so the model starts from zero.
      long long m = 0;
      EXPECT_EQ(atomic_fetch_add(w, i64, 5ll, target), m);
      m += 5;
      atomic_add(w, i64, -2ll, target);
      m -= 2;
      EXPECT_EQ(atomic_fetch_inc(w, i64, target), m);
      ++m;
      atomic_inc(w, i64, target);
      ++m;
      EXPECT_EQ(atomic_fetch(w, i64, target), m);
      EXPECT_EQ(atomic_swap(w, i64, 99ll, target), m);
      EXPECT_EQ(atomic_compare_swap(w, i64, 98ll, 1ll, target), 99ll);  // no match: unchanged
      EXPECT_EQ(atomic_compare_swap(w, i64, 99ll, 1ll, target), 99ll);  // match: now 1
      EXPECT_EQ(g(w, i64, target), 1ll);
      atomic_set(w, u32 + 1, 0xF0F0u, target);
      EXPECT_EQ(atomic_fetch_and(w, u32 + 1, 0xFF00u, target), 0xF0F0u);
      EXPECT_EQ(atomic_fetch_or(w, u32 + 1, 0x000Fu, target), 0xF000u);
      EXPECT_EQ(atomic_fetch_xor(w, u32 + 1, 0xFFFFu, target), 0xF00Fu);
      atomic_and(w, u32 + 1, 0x0FFFu, target);
      atomic_or(w, u32 + 1, 0x10000u, target);
      atomic_xor(w, u32 + 1, 0x1u, target);
      EXPECT_EQ(atomic_fetch(w, u32 + 1, target), ((0x0FF0u & 0x0FFFu) | 0x10000u) ^ 0x1u);
      atomic_add(w, f64, 1.25, target);
      EXPECT_EQ(atomic_fetch_add(w, f64, 2.5, target), 1.25);
      EXPECT_EQ(atomic_swap(w, f64, -4.0, target), 3.75);
      atomic_set(w, f64 + 1, 6.5, target);
      EXPECT_EQ(atomic_fetch(w, f64 + 1, target), 6.5);
    }
    barrier_all(w);
  }
  w.free(f64);
  w.free(u32);
  w.free(i64);
}

}  // namespace
}  // namespace shoal::gpu_test
