// Remote atomics under contention: every thread of every PE hammers the same words on PE 0, which start
// at random values; the final values must be exact, and what the fetching forms returned must be the
// words' successive values. Host-initiated atomics are checked against a sequential model.
#include <algorithm>
#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

constexpr int kBlocks = 8, kThreads = 128, kIters = 16;
// A PE that reaches PE 0 only through the proxy (another node) pays a network round trip per atomic, and its
// compare-and-swap loop loses most races (each round through the proxy settles about one of the threads in
// it, so N proxied threads cost ~N^2/2 round trips): it runs one iteration on one block. With 8 blocks on
// each of 2 such PEs the test took 10-18 s without MPS and over a minute under MPS.
constexpr int kProxiedIters = 1, kProxiedBlocks = 1;
constexpr unsigned kThreadsPerPe = kBlocks * kThreads;

struct counters {
  unsigned long long add, inc, cas, bits_or, bits_fetch_xor, bits_xor, bits_and, swap;
  int add32;
  unsigned inc32;
  float fadd;
  double dadd;
};

// What the fetching atomics returned, one device array of 64-bit slots per PE: each thread's fetch_inc
// and fetch_add (double, as bits) per iteration, then its fetch_xor, fetch_and and swap.
struct fetched_layout {
  static constexpr std::size_t inc = 0, dadd = inc + kThreadsPerPe * kIters, bits_xor = dadd + kThreadsPerPe * kIters,
                               bits_and = bits_xor + kThreadsPerPe, swap = bits_and + kThreadsPerPe,
                               slots = swap + kThreadsPerPe;
};

// Each thread's operands, the same on the host: random xor patterns; or sets one of the low 40 bits and
// and clears one of the high 40, so each leaves part of the random starting word as it was.
__host__ __device__ inline unsigned long long mix64(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__host__ __device__ inline unsigned long long fetch_xor_pattern(int pe, unsigned thread) {
  return mix64((unsigned long long)pe << 32 | thread);
}
__host__ __device__ inline unsigned long long xor_pattern(int pe, unsigned thread) {
  return mix64((unsigned long long)pe << 32 | thread | 1u << 30);
}
__host__ __device__ inline unsigned long long or_bit(int pe, unsigned thread) {
  return 1ull << ((thread + pe * 7) % 40);
}
__host__ __device__ inline unsigned long long and_mask(int pe, unsigned thread) {
  return ~(1ull << (24 + (thread + pe * 7) % 40));
}

__global__ void contention_kernel(device_handle h, counters* c, unsigned long long* fetched, int iters) {
  const int pe0 = 0;
  const unsigned global = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < iters; ++i) {
    atomic_add(h, &c->add, 3ull, pe0);
    fetched[fetched_layout::inc + global * kIters + i] = atomic_fetch_inc(h, &c->inc, pe0);
    atomic_add(h, &c->add32, 1, pe0);
    atomic_inc(h, &c->inc32, pe0);
    atomic_add(h, &c->fadd, 1.0f, pe0);
    const double before = atomic_fetch_add(h, &c->dadd, 0.5, pe0);
    fetched[fetched_layout::dadd + global * kIters + i] = __double_as_longlong(before);
    // An increment by compare-and-swap loop: exact only if compare_swap is atomic.
    unsigned long long seen = atomic_fetch(h, &c->cas, pe0);
    for (;;) {
      unsigned long long previous = atomic_compare_swap(h, &c->cas, seen, seen + 1, pe0);
      if (previous == seen) break;
      seen = previous;
    }
  }
  atomic_or(h, &c->bits_or, or_bit(h.pe, global), pe0);
  fetched[fetched_layout::bits_xor + global] =
      atomic_fetch_xor(h, &c->bits_fetch_xor, fetch_xor_pattern(h.pe, global), pe0);
  atomic_xor(h, &c->bits_xor, xor_pattern(h.pe, global), pe0);
  fetched[fetched_layout::bits_and + global] = atomic_fetch_and(h, &c->bits_and, and_mask(h.pe, global), pe0);
  // Every thread swaps in a unique id; the returned values plus the final value must be exactly the
  // initial value and all ids.
  fetched[fetched_layout::swap + global] = atomic_swap(h, &c->swap, 1000ull + h.pe * kThreadsPerPe + global, pe0);
}

// Whether the values fetching atomics returned from one word are the word's successive states: applied in
// some order, operation i took the word from returned[i] to next(i). As multisets, the returned values and
// the final value are then the initial value and every next(i).
template <typename Next>
bool is_chain(unsigned long long initial, unsigned long long final_value, std::vector<unsigned long long> returned,
              Next next) {
  std::vector<unsigned long long> after{initial};
  for (std::size_t i = 0; i < returned.size(); ++i) after.push_back(next(i));
  returned.push_back(final_value);
  std::sort(returned.begin(), returned.end());
  std::sort(after.begin(), after.end());
  return returned == after;
}

TEST(Atomics, ContentionFromAllThreadsOfAllPes) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  const int n_pes = w.n_pes();
  auto* c = static_cast<counters*>(w.calloc(1, sizeof(counters)));
  // Random starting words (the same on every PE), so an operation that does nothing cannot pass; the float
  // counters start at random integers small enough that every add stays exact.
  std::mt19937_64 rng(20261202);
  counters initial{};
  initial.add = rng(), initial.inc = rng(), initial.cas = rng(), initial.bits_or = rng();
  initial.bits_fetch_xor = rng(), initial.bits_xor = rng(), initial.bits_and = rng(), initial.swap = rng() % 1000;
  initial.add32 = int(rng()), initial.inc32 = unsigned(rng());
  initial.fadd = float(rng() % (1u << 20)), initial.dadd = double(rng() % (1u << 20));
  if (w.pe() == 0) ASSERT_EQ(cudaMemcpy(c, &initial, sizeof(counters), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // landed before peers' atomics (see upload())
  unsigned long long* fetched = nullptr;
  ASSERT_EQ(cudaMalloc(&fetched, fetched_layout::slots * sizeof(unsigned long long)), cudaSuccess);
  // What each PE runs: iterations and threads (the fetched layout keeps kThreadsPerPe slots either way).
  struct share {
    int iters;
    unsigned threads;
  };
  const bool direct = w.ptr(c, 0) != nullptr;
  const share mine_share{direct ? kIters : kProxiedIters, (direct ? kBlocks : kProxiedBlocks) * unsigned(kThreads)};
  std::vector<share> share_of(n_pes);
  w.bootstrap().all_gather(&mine_share, share_of.data(), sizeof mine_share);
  barrier_all(w);
  contention_kernel<<<mine_share.threads / kThreads, kThreads>>>(w.device_handle(), c, fetched, mine_share.iters);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  barrier_all(w);

  std::vector<unsigned long long> mine(fetched_layout::slots), all(fetched_layout::slots * n_pes);
  ASSERT_EQ(cudaMemcpy(mine.data(), fetched, mine.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  w.bootstrap().all_gather(mine.data(), all.data(), mine.size() * 8);
  if (w.pe() == 0) {
    counters got{};
    ASSERT_EQ(cudaMemcpy(&got, c, sizeof(counters), cudaMemcpyDeviceToHost), cudaSuccess);
    unsigned long long ops = 0;
    for (const share& p : share_of) ops += 1ull * p.threads * unsigned(p.iters);
    EXPECT_EQ(got.add, initial.add + 3 * ops);
    EXPECT_EQ(got.inc, initial.inc + ops);
    EXPECT_EQ(got.cas, initial.cas + ops);
    EXPECT_EQ(got.add32, int(unsigned(initial.add32) + unsigned(ops)));
    EXPECT_EQ(got.inc32, initial.inc32 + unsigned(ops));
    EXPECT_EQ(got.fadd, initial.fadd + float(ops));  // exact: below 2^24
    EXPECT_EQ(got.dadd, initial.dadd + 0.5 * double(ops));

    // Per PE and thread, in the order all_gather laid them out.
    auto slot = [&](int pe, std::size_t offset) { return all[std::size_t(pe) * fetched_layout::slots + offset]; };
    std::vector<unsigned long long> incs, want_incs;
    std::vector<double> dadds, want_dadds;
    for (int pe = 0; pe < n_pes; ++pe)
      for (unsigned t = 0; t < share_of[pe].threads; ++t)
        for (int i = 0; i < share_of[pe].iters; ++i) {
          incs.push_back(slot(pe, fetched_layout::inc + t * kIters + i));
          dadds.push_back(std::bit_cast<double>(slot(pe, fetched_layout::dadd + t * kIters + i)));
        }
    for (unsigned long long k = 0; k < ops; ++k) {
      want_incs.push_back(initial.inc + k);
      want_dadds.push_back(initial.dadd + 0.5 * double(k));
    }
    std::sort(incs.begin(), incs.end());
    std::sort(dadds.begin(), dadds.end());
    EXPECT_EQ(incs, want_incs) << "fetch_inc's results are not each value from the start to the end once";
    EXPECT_EQ(dadds, want_dadds) << "fetch_add's (double) results are not each value from the start to the end once";

    unsigned long long want_or = initial.bits_or, want_fetch_xor = initial.bits_fetch_xor, want_xor = initial.bits_xor,
                       want_and = initial.bits_and;
    std::vector<unsigned long long> xors, ands, swaps, xor_operands, and_operands;
    for (int pe = 0; pe < n_pes; ++pe)
      for (unsigned t = 0; t < share_of[pe].threads; ++t) {
        want_or |= or_bit(pe, t);
        want_fetch_xor ^= fetch_xor_pattern(pe, t);
        want_xor ^= xor_pattern(pe, t);
        want_and &= and_mask(pe, t);
        xors.push_back(slot(pe, fetched_layout::bits_xor + t));
        xor_operands.push_back(fetch_xor_pattern(pe, t));
        ands.push_back(slot(pe, fetched_layout::bits_and + t));
        and_operands.push_back(and_mask(pe, t));
        swaps.push_back(slot(pe, fetched_layout::swap + t));
      }
    EXPECT_EQ(got.bits_or, want_or);
    EXPECT_EQ(got.bits_fetch_xor, want_fetch_xor);
    EXPECT_EQ(got.bits_xor, want_xor);
    EXPECT_EQ(got.bits_and, want_and);
    EXPECT_TRUE(is_chain(initial.bits_fetch_xor, got.bits_fetch_xor, xors, [&](std::size_t i) {
      return xors[i] ^ xor_operands[i];
    })) << "fetch_xor's results are not the word's successive values";
    EXPECT_TRUE(is_chain(initial.bits_and, got.bits_and, ands, [&](std::size_t i) {
      return ands[i] & and_operands[i];
    })) << "fetch_and's results are not the word's successive values";
    swaps.push_back(got.swap);
    std::vector<unsigned long long> want{initial.swap};
    for (int pe = 0; pe < n_pes; ++pe)
      for (unsigned t = 0; t < share_of[pe].threads; ++t) want.push_back(1000ull + pe * kThreadsPerPe + t);
    std::sort(swaps.begin(), swaps.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(swaps, want) << "swap lost or duplicated a value";
  }
  barrier_all(w);
  cudaFree(fetched);
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
