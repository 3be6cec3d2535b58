// Host-initiated put/get/p/g and the stream-ordered forms: put/get/put_signal/signal_op/waits/barrier
// on a stream, and captured CUDA graphs of them replayed many times with fresh data each time.
#include <cstring>
#include <stdexcept>
#include <string>

#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

void cuda_or_throw(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
}

// What the put-and-signal tests share: a symmetric inbox of `n` bytes and `words` signal words (zero), a
// device source and a device copy of `n` bytes, and a stream, all freed at scope exit (collectively: every
// PE runs the same tests). A failed allocation throws, which fails the test.
struct signal_buffers {
  signal_buffers(shoal::world& world, std::size_t bytes, std::size_t words)
      : w(world),
        n(bytes),
        inbox(static_cast<std::uint8_t*>(w.malloc(n))),
        sig(static_cast<std::uint64_t*>(w.calloc(words, sizeof(std::uint64_t)))) {
    cuda_or_throw(cudaMalloc(&src, n), "cudaMalloc");
    cuda_or_throw(cudaMalloc(&copy, n), "cudaMalloc");
    cuda_or_throw(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  ~signal_buffers() {
    cudaStreamDestroy(s);
    cudaFree(src);
    cudaFree(copy);
    w.free(sig);
    w.free(inbox);
  }
  signal_buffers(const signal_buffers&) = delete;
  signal_buffers& operator=(const signal_buffers&) = delete;

  shoal::world& w;
  const std::size_t n;
  std::uint8_t* const inbox;
  std::uint64_t* const sig;
  std::uint8_t* src = nullptr;
  std::uint8_t* copy = nullptr;
  cudaStream_t s = nullptr;
};

TEST(Host, PutGetBlocking) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  const std::size_t n = (3u << 20) + 17;
  auto* sym = static_cast<std::uint8_t*>(w.malloc(n));
  auto sent = random_bytes(400 + w.pe(), n);
  put(w, sym, sent.data(), n, next_pe(w));  // from host memory straight into the peer's heap
  barrier_all(w);
  EXPECT_EQ(first_mismatch(download(sym, n), random_bytes(400 + prev_pe(w), n)), -1);
  barrier_all(w);  // every PE has checked its copy before anyone overwrites its first int below
  std::vector<std::uint8_t> fetched(n);
  get(w, fetched.data(), sym, n, next_pe(w));  // the next PE holds what its predecessor (me) sent
  EXPECT_EQ(first_mismatch(fetched, sent), -1);
  p(w, reinterpret_cast<int*>(sym), 77 + w.pe(), next_pe(w));
  barrier_all(w);
  EXPECT_EQ(g(w, reinterpret_cast<int*>(sym), w.pe()), 77 + prev_pe(w));
  barrier_all(w);
  w.free(sym);
}

TEST(Stream, PutSignalAndWaitOnStream) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  signal_buffers b(w, (1u << 20) + 3, 2);
  const std::size_t n = b.n;
  std::uint8_t *inbox = b.inbox, *src = b.src, *copy = b.copy;
  std::uint64_t* sig = b.sig;
  cudaStream_t s = b.s;
  barrier_all(w);
  for (int round = 1; round <= 4; ++round) {
    auto data = random_bytes(round * 100 + w.pe(), n);
    upload(src, data);
    // set for odd rounds, add 1 for even ones: the signal reads `round` either way.
    sig_op op = round % 2 ? sig_op::set : sig_op::add;
    put_signal_on_stream(w, inbox, src, n, sig, op == sig_op::set ? round : 1, op, next_pe(w), s);
    signal_wait_until_on_stream(w, sig, round % 3 == 0 ? cmp::eq : cmp::ge, round, s);
    ASSERT_EQ(cudaMemcpyAsync(copy, inbox, n, cudaMemcpyDeviceToDevice, s), cudaSuccess);
    // Kernel-form wait (cmp::gt) and signal_op add on the second word, then a stream barrier.
    signal_op_on_stream(w, sig + 1, 2, sig_op::add, next_pe(w), s);
    signal_wait_until_on_stream(w, sig + 1, cmp::gt, 2 * round - 1, s);
    quiet_on_stream(w, s);
    barrier_all_on_stream(w, s);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(first_mismatch(download(copy, n), random_bytes(round * 100 + prev_pe(w), n)), -1) << "round " << round;
    std::uint64_t words[2];
    ASSERT_EQ(cudaMemcpy(words, sig, sizeof(words), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(words[0], std::uint64_t(round));
    EXPECT_EQ(words[1], std::uint64_t(2 * round));
    barrier_all(w);  // nobody starts the next round's signals before every PE has read this round's
  }
  // get_on_stream: read the next PE's inbox (which holds my last round's data).
  ASSERT_EQ(cudaMemsetAsync(copy, 0, n, s), cudaSuccess);
  get_on_stream(w, copy, inbox, n, next_pe(w), s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(first_mismatch(download(copy, n), random_bytes(4 * 100 + w.pe(), n)), -1);
  // A misaligned signal word is refused before anything is enqueued: its kernel would fault.
  auto* crooked = reinterpret_cast<std::uint64_t*>(reinterpret_cast<std::byte*>(sig) + 4);
  EXPECT_THROW(signal_op_on_stream(w, crooked, 1, sig_op::add, next_pe(w), s), shoal::error);
  EXPECT_THROW(put_signal_on_stream(w, inbox, src, 8, crooked, 1, sig_op::set, next_pe(w), s), shoal::error);
  EXPECT_THROW(signal_wait_until_on_stream(w, crooked, cmp::gt, 1, s), shoal::error);
  // A data destination outside the heap is refused under the caller's name, not its data half's.
  try {
    put_signal_on_stream(w, copy, src, 8, sig, 1, sig_op::set, next_pe(w), s);
    ADD_FAILURE() << "put_signal_on_stream accepted a destination outside the symmetric heap";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.context(), "shoal::put_signal_on_stream") << e.what();
  }
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  barrier_all(w);
}

// A graph of {put to the next PE, barrier} replayed with fresh source data each time: the captured
// barrier must keep its meaning on every replay (epochs in device memory).
TEST(Stream, CapturedGraphReplaysManyTimes) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  const std::size_t n = 256 * 1024 + 5;
  auto* inbox = static_cast<std::uint8_t*>(w.malloc(n));
  std::uint8_t* src = nullptr;
  ASSERT_EQ(cudaMalloc(&src, n), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  barrier_all_on_stream(w, s);  // the peer has checked my previous replay's data
  put_on_stream(w, inbox, src, n, next_pe(w), s);
  barrier_all_on_stream(w, s);  // every put has landed
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 40; ++replay) {
    upload(src, random_bytes(9000 + replay * 8 + w.pe(), n));
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(first_mismatch(download(inbox, n), random_bytes(9000 + replay * 8 + prev_pe(w), n)), -1)
        << "replay " << replay;
  }
  barrier_all(w);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFree(src);
  w.free(inbox);
}

// put_signal_on_stream with sig_op::set captured in a graph (where the set is a kernel, not a stream write)
// and replayed with fresh data: the receiver that sees the signal must see every byte of that replay.
TEST(Stream, CapturedPutSignalSetOrdersItsData) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  constexpr std::uint64_t kSignal = 0x5EED0000CAFEull;
  signal_buffers b(w, 256 * 1024 + 5, 1);
  const std::size_t n = b.n;
  std::uint8_t *inbox = b.inbox, *src = b.src, *copy = b.copy;
  std::uint64_t* sig = b.sig;
  cudaStream_t s = b.s;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  put_signal_on_stream(w, inbox, src, n, sig, kSignal, sig_op::set, next_pe(w), s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 20; ++replay) {
    upload(src, random_bytes(9500 + replay * 8 + w.pe(), n));
    ASSERT_EQ(cudaMemsetAsync(sig, 0, sizeof(std::uint64_t), s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    barrier_all(w);  // every signal word is clear before any PE replays
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    signal_wait_until_on_stream(w, sig, cmp::eq, kSignal, s);
    ASSERT_EQ(cudaMemcpyAsync(copy, inbox, n, cudaMemcpyDeviceToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(first_mismatch(download(copy, n), random_bytes(9500 + replay * 8 + prev_pe(w), n)), -1)
        << "replay " << replay;
    barrier_all(w);  // the previous PE's next replay writes my inbox only after I have copied it
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace
}  // namespace shoal::gpu_test
