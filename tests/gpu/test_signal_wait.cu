// Signals and waits: put_signal at every scope delivers all data before the signal (checked in the
// receiving kernel right after its wait, round after round), signal_op set/add, wait_until for every
// comparison and several types, the timeout forms, and the vector waits.
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

__global__ void signal_op_kernel(device_handle h, std::uint64_t* sig, int target, std::uint64_t* fetched) {
  // Every thread adds its index + 1; then thread 0 sets the second word.
  signal_op(h, sig, threadIdx.x + 1, sig_op::add, target);
  if (threadIdx.x == 0) signal_op(h, sig + 1, 0xABCDEF0123ull, sig_op::set, target);
  quiet(h);
  __syncthreads();
  if (threadIdx.x == 0) *fetched = signal_fetch(h, sig);
}

TEST(Signal, SignalOpSetAndAdd) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  auto* sig = static_cast<std::uint64_t*>(w.calloc(2, sizeof(std::uint64_t)));
  std::uint64_t* fetched = nullptr;
  ASSERT_EQ(cudaMalloc(&fetched, 8), cudaSuccess);
  signal_op_kernel<<<1, 128>>>(w.device_handle(), sig, next_pe(w), fetched);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  barrier_all(w);
  std::uint64_t words[2];
  ASSERT_EQ(cudaMemcpy(words, sig, sizeof(words), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(words[0], 128u * 129u / 2u);
  EXPECT_EQ(words[1], 0xABCDEF0123ull);
  barrier_all(w);
  cudaFree(fetched);
  w.free(sig);
}

// wait_until: the waiter's word starts at `initial`; the next PE's kernel stores `release` into it
// after spinning a while, so the waiter really waits. Returns the value the wait saw.
template <typename T>
__global__ void wait_kernel(device_handle h, T* word, cmp op, T operand, T release, int target, T* seen) {
  // Delay, then release my target's waiter.
  std::uint64_t start = detail::global_timer_ns();
  while (detail::global_timer_ns() - start < 20000) {
  }
  p(h, word, release, target);
  quiet(h);
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
  wait_kernel<T><<<1, 1>>>(w.device_handle(), word, op, operand, release, next_pe(w), seen);
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

__global__ void wait_for_kernel(device_handle h, std::uint64_t* word, wait_status* out) {
  out[0] = wait_until_for(h, word, cmp::eq, std::uint64_t(12345), 2000000);  // nobody writes: 2 ms then timed_out
  out[1] = wait_until_for(h, word, cmp::ge, std::uint64_t(0), 2000000);      // true at once
  out[2] = signal_wait_until_for(h, word, cmp::ne, std::uint64_t(0), 1000000);
}

TEST(Wait, TimeoutFormsReturnStatus) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  auto* word = static_cast<std::uint64_t*>(w.calloc(1, sizeof(std::uint64_t)));
  wait_status* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 3 * sizeof(wait_status)), cudaSuccess);
  wait_for_kernel<<<1, 1>>>(w.device_handle(), word, out);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  wait_status got[3];
  ASSERT_EQ(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got[0], wait_status::timed_out);
  EXPECT_EQ(got[1], wait_status::ok);
  EXPECT_EQ(got[2], wait_status::timed_out);
  barrier_all(w);
  cudaFree(out);
  w.free(word);
}

// Vector waits: word i of every PE is set by PE i; status masks out word `masked`.
template <typename Scope>
__global__ void vector_wait_kernel(device_handle h, int* words, int masked, long long* results) {
  Scope scope;
  if (Scope::leader())
    for (int pe = 0; pe < h.n_pes; ++pe) p(h, words + h.pe, 10 + h.pe, pe);
  quiet(h);
  __shared__ int status[64];
  for (int i = Scope::rank(); i < 64; i += Scope::size()) status[i] = i == masked ? 1 : 0;
  Scope::sync();
  wait_until_all(scope, h, words, h.n_pes, static_cast<const int*>(nullptr), cmp::ge, 10);  // every word is set
  wait_until_all(scope, h, words, h.n_pes, status, cmp::ge, 10);
  std::size_t any = wait_until_any(scope, h, words, h.n_pes, status, cmp::ge, 10);
  if (Scope::leader()) {
    std::size_t indices[64];
    results[0] = static_cast<long long>(any);
    results[1] = static_cast<long long>(wait_until_some(h, words, h.n_pes, indices, status, cmp::ge, 10));
    results[2] = test_all(h, words, h.n_pes, status, cmp::ge, 10) ? 1 : 0;
    results[3] = static_cast<long long>(test_any(h, words, h.n_pes, status, cmp::gt, 1000));
    results[4] = static_cast<long long>(test_some(h, words, h.n_pes, indices, nullptr, cmp::eq, 10));
    results[5] = static_cast<long long>(indices[0]);
  }
}

template <typename Scope>
void check_vector_waits(unsigned threads) {
  shoal::world& w = *the_world();
  ASSERT_LE(w.n_pes(), 64);
  int* words = static_cast<int*>(w.calloc(w.n_pes(), sizeof(int)));
  long long* results = nullptr;
  ASSERT_EQ(cudaMalloc(&results, 6 * sizeof(long long)), cudaSuccess);
  int masked = w.n_pes() > 1 ? 0 : -1;
  vector_wait_kernel<Scope><<<1, threads>>>(w.device_handle(), words, masked, results);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  long long got[6];
  ASSERT_EQ(cudaMemcpy(got, results, sizeof(got), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_NE(got[0], masked);
  EXPECT_GE(got[0], 0);
  EXPECT_LT(got[0], w.n_pes());
  EXPECT_EQ(got[1], w.n_pes() - (masked >= 0 ? 1 : 0));
  EXPECT_EQ(got[2], 1);
  EXPECT_EQ(got[3], static_cast<long long>(SIZE_MAX));
  EXPECT_EQ(got[4], 1);  // only word 0 (set by PE 0) equals 10
  EXPECT_EQ(got[5], 0);
  barrier_all(w);
  cudaFree(results);
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
