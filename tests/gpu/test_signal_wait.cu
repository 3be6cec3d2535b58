// Signals and waits: put_signal at every scope delivers all data before the signal (checked in the
// receiving kernel right after its wait, round after round), signal_op set/add, wait_until for every
// comparison and several types, the timeout forms, and the vector waits with and without a mask. The
// wait tests wait on stores made after a delay by another CTA (of the previous PE, or of this one at 1 PE).
#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

constexpr int kRounds = 8;

// Ping-pong of data + signal: round r sends rounds[r] to the next PE with the signal, the receiver
// waits, copies what arrived into `seen[r]` and acknowledges. Each round's data is different.
constexpr int kMaxThreads = 512;  // the largest CTA launched below: its register budget bounds the kernel's

template <typename Scope>
__global__ void __launch_bounds__(kMaxThreads)
    put_signal_rounds(device_handle h, std::byte* inbox, const std::byte* rounds, std::byte* seen, std::size_t n,
                      std::uint64_t* sig, std::uint64_t* ack, sig_op op, int target, int source) {
  Scope scope;
  const std::uint64_t per_round = std::is_same_v<Scope, grid_scope> ? grid_scope::n_blocks() : 1;
  for (int r = 0; r < kRounds; ++r) {
    std::uint64_t value = op == sig_op::set ? std::uint64_t(r + 1) : 1;
    put_signal_bytes(scope, h, inbox, rounds + r * n, n, sig, value, op, target);
    // Wait for my source's round r, copy what is visible now, then acknowledge.
    std::uint64_t want = op == sig_op::set ? std::uint64_t(r + 1) : per_round * (r + 1);
    if constexpr (std::is_same_v<Scope, grid_scope>) {
      signal_wait_until(block, h, sig, cmp::ge, want);
      detail::copy_bytes(seen + r * n, inbox, n, grid_scope::rank(), grid_scope::size());
      grid_sync(h);
      if (grid_scope::leader()) {
        quiet(h);
        signal_op(h, ack, 1, sig_op::add, source);
      }
      if (block_scope::leader()) wait_until(h, ack, cmp::ge, std::uint64_t(r + 1));
      grid_sync(h);
    } else {
      signal_wait_until(scope, h, sig, cmp::ge, want);
      detail::copy_bytes(seen + r * n, inbox, n, Scope::rank(), Scope::size());
      Scope::sync();
      if (Scope::leader()) {
        quiet(h);  // my reads of the inbox are done before the sender may overwrite it
        signal_op(h, ack, 1, sig_op::add, source);
        wait_until(h, ack, cmp::ge, std::uint64_t(r + 1));  // my target has consumed my round r
      }
      Scope::sync();
    }
  }
}

template <typename Scope>
void check_put_signal(unsigned blocks, unsigned threads, std::size_t n, sig_op op) {
  shoal::world& w = *the_world();
  SCOPED_TRACE("n=" + std::to_string(n) + (op == sig_op::set ? " set" : " add"));
  auto* inbox = static_cast<std::byte*>(w.malloc(n + 16));
  auto* sig = static_cast<std::uint64_t*>(w.calloc(2, sizeof(std::uint64_t)));
  std::byte *rounds = nullptr, *seen = nullptr;
  ASSERT_EQ(cudaMalloc(&rounds, kRounds * n + 1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&seen, kRounds * n + 1), cudaSuccess);
  auto sent_by = [&](int pe) { return random_bytes(777 + pe * 13 + n, kRounds * n); };
  upload(rounds, sent_by(w.pe()));
  barrier_all(w);
  put_signal_rounds<Scope>
      <<<blocks, threads>>>(w.device_handle(), inbox, rounds, seen, n, sig, sig + 1, op, next_pe(w), prev_pe(w));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(first_mismatch(download(seen, kRounds * n), sent_by(prev_pe(w))), -1);
  barrier_all(w);
  cudaFree(rounds);
  cudaFree(seen);
  w.free(sig);
  w.free(inbox);
}

TEST(Signal, PutSignalEveryScope) {
  SHOAL_REQUIRE_WORLD(1);
  for (sig_op op : {sig_op::set, sig_op::add}) {
    check_put_signal<thread_scope>(1, 1, 8, op);
    check_put_signal<thread_scope>(1, 1, 4099, op);
    check_put_signal<warp_scope>(1, 32, 4096, op);
    check_put_signal<warp_scope>(1, 32, 65536 + 3, op);
    check_put_signal<block_scope>(1, kMaxThreads, 1 << 20, op);
  }
  check_put_signal<grid_scope>(8, 256, (1 << 20) + 16, sig_op::add);
}

__global__ void signal_op_kernel(device_handle h, std::uint64_t* sig, std::uint64_t set_value, int target) {
  // Every thread adds its index + 1; then thread 0 sets the second word. Complete at quiet (a target on
  // another node is signalled through the proxy).
  signal_op(h, sig, threadIdx.x + 1, sig_op::add, target);
  if (threadIdx.x == 0) signal_op(h, sig + 1, set_value, sig_op::set, target);
  quiet(h);
}

__global__ void signal_fetch_kernel(device_handle h, const std::uint64_t* sig, std::uint64_t* fetched) {
  fetched[threadIdx.x] = signal_fetch(h, sig + threadIdx.x);
}

TEST(Signal, SignalOpSetAndAdd) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  auto* sig = static_cast<std::uint64_t*>(w.malloc(2 * sizeof(std::uint64_t)));
  std::mt19937_64 rng(5150 + std::uint64_t(w.pe()));
  const std::uint64_t initial[2] = {rng(), rng()};  // this PE's words; the previous PE signals them
  auto set_value_of = [](int pe) { return std::mt19937_64(6160 + std::uint64_t(pe))(); };  // what `pe` sets
  upload(sig, std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(initial),
                                        reinterpret_cast<const std::uint8_t*>(initial) + sizeof initial));
  std::uint64_t* fetched = nullptr;
  ASSERT_EQ(cudaMalloc(&fetched, 2 * sizeof(std::uint64_t)), cudaSuccess);
  barrier_all(w);
  signal_op_kernel<<<1, 128>>>(w.device_handle(), sig, set_value_of(w.pe()), next_pe(w));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  barrier_all(w);  // every PE's signals have landed
  signal_fetch_kernel<<<1, 2>>>(w.device_handle(), sig, fetched);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::uint64_t words[2], got[2];
  ASSERT_EQ(cudaMemcpy(words, sig, sizeof(words), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got, fetched, sizeof(got), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(words[0], initial[0] + 128u * 129u / 2u);
  EXPECT_EQ(words[1], set_value_of(prev_pe(w)));
  EXPECT_EQ(got[0], words[0]) << "signal_fetch";
  EXPECT_EQ(got[1], words[1]) << "signal_fetch";
  barrier_all(w);
  cudaFree(fetched);
  w.free(sig);
}

// The writer CTA of the wait tests: spins `delay_ns`, then stores `release` into `word` on `target`.
// The waiter runs in another CTA of the same kernel, so at 1 PE (target = self) it too waits for a store
// that has not happened yet.
template <typename T>
__device__ void release_later(const device_handle& h, T* word, T release, int target, std::uint64_t delay_ns) {
  const std::uint64_t start = detail::global_timer_ns();
  while (detail::global_timer_ns() - start < delay_ns) {
  }
  p(h, word, release, target);
  quiet(h);
}

// wait_until: the waiter's word starts at `initial`; block 0 stores `release` into the next PE's word
// after 20 us, and block 1 waits on its own. Returns the value the wait saw.
template <typename T>
__global__ void wait_kernel(device_handle h, T* word, cmp op, T operand, T release, int target, T* seen) {
  if (blockIdx.x == 0)
    release_later(h, word, release, target, 20000);
  else
    *seen = wait_until(h, word, op, operand);
}

template <typename T>
void check_wait(cmp op, T initial, T operand, T release) {
  shoal::world& w = *the_world();
  T* word = w.malloc_array<T>(1);
  T* seen = nullptr;
  ASSERT_EQ(cudaMalloc(&seen, sizeof(T)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(word, &initial, sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // landed before a peer signals it (see upload())
  barrier_all(w);
  wait_kernel<T><<<2, 1>>>(w.device_handle(), word, op, operand, release, next_pe(w), seen);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  T got{};
  ASSERT_EQ(cudaMemcpy(&got, seen, sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, release);
  barrier_all(w);
  cudaFree(seen);
  w.free(word);
}

TEST(Wait, EveryComparisonAndType) {
  SHOAL_REQUIRE_WORLD(1);
  check_wait<int>(cmp::eq, 0, 42, 42);
  check_wait<int>(cmp::ne, 7, 7, -3);
  check_wait<long long>(cmp::gt, 0, 1000000000000ll, 1000000000001ll);
  check_wait<unsigned>(cmp::ge, 1, 9, 9);
  check_wait<std::int64_t>(cmp::lt, 50, -10, -11);
  check_wait<std::uint64_t>(cmp::le, 900, 100, 100);
  check_wait<std::uint32_t>(cmp::eq, 0, 0xFFFFFFFFu, 0xFFFFFFFFu);
}

// words[0] is never written; words[1] is released by the previous PE's block 0 after 50 us, well within the
// waits' 1 s (the waiter's block 1 starts waiting at once).
__global__ void wait_for_kernel(device_handle h, std::uint64_t* words, std::uint64_t release, int target,
                                wait_status* out) {
  if (blockIdx.x == 0) {
    release_later(h, words + 1, release, target, 50000);
    return;
  }
  out[0] = wait_until_for(h, words, cmp::eq, std::uint64_t(12345), 2000000);  // nobody writes: 2 ms then timed_out
  out[1] = wait_until_for(h, words, cmp::ge, std::uint64_t(0), 2000000);      // true at once
  out[2] = signal_wait_until_for(h, words, cmp::ne, std::uint64_t(0), 1000000);
  out[3] = signal_wait_until_for(h, words + 1, cmp::ge, release, 1000000000);  // the late write arrives
  out[4] = wait_until_for(h, words + 1, cmp::eq, release, 1000000000);
  out[5] = wait_until_for(h, words + 1, cmp::gt, release, 0);  // a zero timeout tests once
}

TEST(Wait, TimeoutFormsReturnStatus) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  auto* words = static_cast<std::uint64_t*>(w.calloc(2, sizeof(std::uint64_t)));
  wait_status* out = nullptr;
  constexpr int kResults = 6;
  ASSERT_EQ(cudaMalloc(&out, kResults * sizeof(wait_status)), cudaSuccess);
  barrier_all(w);
  const std::uint64_t release = 0x5EED1234ull;  // not 0, where the late word starts
  wait_for_kernel<<<2, 1>>>(w.device_handle(), words, release, next_pe(w), out);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  wait_status got[kResults];
  ASSERT_EQ(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got[0], wait_status::timed_out);
  EXPECT_EQ(got[1], wait_status::ok);
  EXPECT_EQ(got[2], wait_status::timed_out);
  EXPECT_EQ(got[3], wait_status::ok) << "a write within the timeout";
  EXPECT_EQ(got[4], wait_status::ok);
  EXPECT_EQ(got[5], wait_status::timed_out);
  barrier_all(w);
  cudaFree(out);
  w.free(words);
}

// Vector waits. Each PE has kVectorWords words starting below 10; status masks out the words in
// kMaskedWords. Block 0 of the previous PE stores 10 + i into each unmasked word i, one every 5 us after
// 20 us, and never writes a masked word, so a wait that ignored the mask would never return (and trap at
// the wait timeout); block 1 waits at Scope and runs the test forms once all unmasked words are set.
constexpr int kVectorWords = 8;
constexpr unsigned kMaskedWords = 1u << 1 | 1u << 4 | 1u << 6;
constexpr int kUnmasked = 5;
__host__ __device__ constexpr bool masked(int word) { return (kMaskedWords >> word & 1u) != 0; }

enum vector_result : int {
  first_any,          // wait_until_any: an unmasked word
  some_count,         // wait_until_some: at least one
  all_vector_done,    // wait_until_all_vector returned
  test_all_masked,    // test_all with the mask: 1
  test_all_unmasked,  // test_all without it: 0 (the masked words are below 10)
  test_any_masked,    // test_any(< 10) with the mask: none
  test_any_unmasked,  // test_any(< 10) without it: the first masked word
  test_some_count,    // test_some(>= 10) with the mask: every unmasked word
  test_some_indices,  // ... their indices, one decimal digit each, in order
  any_all_masked,     // wait_until_any with every word masked: none
  kVectorResults
};

template <typename Scope>
__global__ void vector_wait_kernel(device_handle h, int* words, const int* status, const int* all_masked, int target,
                                   long long* results) {
  Scope scope;
  if (blockIdx.x == 0) {
    if (!Scope::leader()) return;
    for (int i = 0, released = 0; i < kVectorWords; ++i)
      if (!masked(i)) release_later(h, words + i, 10 + i, target, released++ == 0 ? 20000 : 5000);
    return;
  }
  const std::size_t any = wait_until_any(scope, h, words, kVectorWords, status, cmp::ge, 10);
  wait_until_all(scope, h, words, kVectorWords, status, cmp::ge, 10);
  if (!Scope::leader()) return;
  int wanted[kVectorWords];
  for (int i = 0; i < kVectorWords; ++i) wanted[i] = masked(i) ? 999 : 10 + i;  // a masked one: never
  wait_until_all_vector(h, words, kVectorWords, status, cmp::eq, static_cast<const int*>(wanted));
  std::size_t indices[kVectorWords];
  long long* r = results;
  r[first_any] = static_cast<long long>(any);
  r[some_count] = static_cast<long long>(wait_until_some(h, words, kVectorWords, indices, status, cmp::ge, 10));
  r[all_vector_done] = 1;
  r[test_all_masked] = test_all(h, words, kVectorWords, status, cmp::ge, 10);
  r[test_all_unmasked] = test_all(h, words, kVectorWords, static_cast<const int*>(nullptr), cmp::ge, 10);
  r[test_any_masked] = static_cast<long long>(test_any(h, words, kVectorWords, status, cmp::lt, 10));
  r[test_any_unmasked] =
      static_cast<long long>(test_any(h, words, kVectorWords, static_cast<const int*>(nullptr), cmp::lt, 10));
  const std::size_t found = test_some(h, words, kVectorWords, indices, status, cmp::ge, 10);
  r[test_some_count] = static_cast<long long>(found);
  r[test_some_indices] = 0;
  for (std::size_t k = 0; k < found && k < kVectorWords; ++k)
    r[test_some_indices] = r[test_some_indices] * 10 + indices[k];
  r[any_all_masked] = static_cast<long long>(wait_until_any(h, words, kVectorWords, all_masked, cmp::ge, 0));
}

template <typename Scope>
void check_vector_waits(unsigned threads) {
  shoal::world& w = *the_world();
  SCOPED_TRACE(std::to_string(threads) + " threads");
  int* words = w.malloc_array<int>(kVectorWords);
  std::mt19937 rng(31 + threads);
  std::vector<int> initial(kVectorWords), status(kVectorWords), all_masked(kVectorWords, 1);
  for (int i = 0; i < kVectorWords; ++i) {
    initial[i] = int(rng() % 10);
    status[i] = masked(i) ? int(1 + rng() % 100) : 0;  // any non-zero status masks
  }
  upload(words, std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(initial.data()),
                                          reinterpret_cast<const std::uint8_t*>(initial.data() + kVectorWords)));
  int *d_status = nullptr, *d_all_masked = nullptr;
  long long* results = nullptr;
  ASSERT_EQ(cudaMalloc(&d_status, 2 * kVectorWords * sizeof(int)), cudaSuccess);
  d_all_masked = d_status + kVectorWords;
  ASSERT_EQ(cudaMemcpy(d_status, status.data(), kVectorWords * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_all_masked, all_masked.data(), kVectorWords * sizeof(int), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(&results, kVectorResults * sizeof(long long)), cudaSuccess);
  ASSERT_EQ(cudaMemset(results, 0xFF, kVectorResults * sizeof(long long)), cudaSuccess);
  barrier_all(w);
  vector_wait_kernel<Scope><<<2, threads>>>(w.device_handle(), words, d_status, d_all_masked, next_pe(w), results);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  long long got[kVectorResults];
  ASSERT_EQ(cudaMemcpy(got, results, sizeof(got), cudaMemcpyDeviceToHost), cudaSuccess);
  long long unmasked_indices = 0;
  int first_masked = -1;
  for (int i = 0; i < kVectorWords; ++i) {
    if (!masked(i)) unmasked_indices = unmasked_indices * 10 + i;
    if (masked(i) && first_masked < 0) first_masked = i;
  }
  ASSERT_GE(got[first_any], 0);
  ASSERT_LT(got[first_any], kVectorWords);
  EXPECT_FALSE(masked(int(got[first_any]))) << "wait_until_any returned masked word " << got[first_any];
  EXPECT_GE(got[some_count], 1);
  EXPECT_LE(got[some_count], kUnmasked);
  EXPECT_EQ(got[all_vector_done], 1);
  EXPECT_EQ(got[test_all_masked], 1);
  EXPECT_EQ(got[test_all_unmasked], 0);
  EXPECT_EQ(got[test_any_masked], static_cast<long long>(SIZE_MAX));
  EXPECT_EQ(got[test_any_unmasked], first_masked);
  EXPECT_EQ(got[test_some_count], kUnmasked);
  EXPECT_EQ(got[test_some_indices], unmasked_indices);
  EXPECT_EQ(got[any_all_masked], static_cast<long long>(SIZE_MAX));
  std::vector<int> final_words(kVectorWords);
  ASSERT_EQ(cudaMemcpy(final_words.data(), words, kVectorWords * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < kVectorWords; ++i) EXPECT_EQ(final_words[i], masked(i) ? initial[i] : 10 + i) << "word " << i;
  barrier_all(w);
  cudaFree(results);
  cudaFree(d_status);
  w.free(words);
}

// wait_until_some waits on its count: a word that compared true and changed back before a second look
// must not make it return 0. CTA 1 toggles word 0 between 1 and 0 while CTA 0 waits for == 1, many times.
// The two CTAs need each other resident at once, so the kernel is launched cooperatively (CUDA refuses the
// launch rather than run them in turn), and neither spins without a bound: each gives up on the other after
// kPartnerWait, so a scheduling failure reads as one, not as a hang or a wait timeout.
// The toggler holds each value for a random number of cycles: toggling in a fixed loop once took the same
// time as the waiter's look, and the two locked in phase, the waiter seeing only 0 for seconds at a time.
// flags[0]: CTA 0 is done; flags[1]: CTA 1 has started. *zero_returns is kNeverStarted when CTA 1 did not start
// in time, kWaiterGone when CTA 0 did not finish before CTA 1 gave up.
constexpr unsigned long long kNeverStarted = ~0ull;
constexpr unsigned long long kWaiterGone = ~0ull - 1;
constexpr std::uint64_t kPartnerWait = 30'000'000'000ull;  // ns; the 100000 waits take well under a second
__global__ void some_under_toggling(device_handle h, unsigned long long* words, int* flags, int rounds,
                                    unsigned long long* zero_returns) {
  if (threadIdx.x != 0) return;
  cuda::atomic_ref<int, cuda::thread_scope_device> stopped(flags[0]), started(flags[1]);
  const std::uint64_t since = detail::global_timer_ns();
  if (blockIdx.x == 1) {
    started.store(1, cuda::memory_order_relaxed);
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> word(words[0]);
    unsigned lcg = 0x9e3779b9u;
    for (unsigned long long v = 1; stopped.load(cuda::memory_order_relaxed) == 0; v ^= 1) {
      word.store(v, cuda::memory_order_relaxed);
      lcg = lcg * 1664525u + 1013904223u;
      const long long hold = lcg >> 21;  // 0 .. 2047 cycles, about a microsecond at most
      for (const long long t0 = clock64(); clock64() - t0 < hold;) {
      }
      if ((v & 1) && detail::global_timer_ns() - since > kPartnerWait) {
        word.store(1, cuda::memory_order_relaxed);  // a waiter still inside a wait can return
        atomicCAS(zero_returns, 0ull, kWaiterGone);
        return;
      }
    }
    return;
  }
  while (started.load(cuda::memory_order_relaxed) == 0) {
    if (detail::global_timer_ns() - since > kPartnerWait) {
      *zero_returns = kNeverStarted;
      stopped.store(1, cuda::memory_order_relaxed);
      return;
    }
  }
  std::size_t indices[2];
  unsigned long long zeros = 0;
  for (int i = 0; i < rounds; ++i)
    zeros += wait_until_some(h, words, 2, indices, static_cast<const int*>(nullptr), cmp::eq, 1ull) == 0;
  // Only where CTA 1 has not given up already: its mark says the count is incomplete.
  atomicCAS(zero_returns, 0ull, zeros);
  stopped.store(1, cuda::memory_order_relaxed);
}

TEST(Wait, SomeReturnsAtLeastOneWhileWordsChange) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  auto* words = static_cast<unsigned long long*>(w.calloc(2, sizeof(unsigned long long)));  // word 1 stays 0
  int* flags = nullptr;
  unsigned long long* zeros = nullptr;
  CUDA_OK(cudaMalloc(&flags, 2 * sizeof(int)));
  CUDA_OK(cudaMemset(flags, 0, 2 * sizeof(int)));
  CUDA_OK(cudaMalloc(&zeros, sizeof(unsigned long long)));
  CUDA_OK(cudaMemset(zeros, 0, sizeof(unsigned long long)));
  device_handle h = w.device_handle();
  int rounds = 100000;
  void* args[] = {&h, &words, &flags, &rounds, &zeros};
  CUDA_OK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(some_under_toggling), dim3(2), dim3(32), args));
  CUDA_OK(cudaDeviceSynchronize());
  unsigned long long got = 1;
  CUDA_OK(cudaMemcpy(&got, zeros, sizeof got, cudaMemcpyDeviceToHost));
  if (got == kNeverStarted)
    ADD_FAILURE() << "the toggling CTA never ran beside the waiting one (30 s): no wait was tested";
  else if (got == kWaiterGone)
    ADD_FAILURE() << "the waiting CTA did not finish its waits within 30 s of the toggling CTA's start";
  else
    EXPECT_EQ(got, 0u) << "wait_until_some returned 0 indices this many times out of 100000";
  CUDA_OK(cudaFree(flags));
  CUDA_OK(cudaFree(zeros));
  barrier_all(w);
  w.free(words);
}

TEST(Wait, VectorForms) {
  SHOAL_REQUIRE_WORLD(1);
  check_vector_waits<thread_scope>(1);
  check_vector_waits<warp_scope>(32);
  check_vector_waits<block_scope>(128);
}

}  // namespace
}  // namespace shoal::gpu_test
