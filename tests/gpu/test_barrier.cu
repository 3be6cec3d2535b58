// Barriers inside kernels at thread, warp, block and grid scope, many in a row: each round every PE
// writes a value into every other PE and, after the barrier, must see every PE's value of that round.
// Then grid_sync alone, in kernels of several grid sizes, and the barriers on a stream, after host copies
// and after a kernel's puts; and a signal add on a stream after a kernel's puts, which alone must order them.
#include <algorithm>

#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

constexpr int kRounds = 50;

// The writer is the scope's last thread (at grid scope the last CTA's), not the one that announces the
// arrival: the barrier's one fence must cover other threads' writes.
template <typename Scope>
__global__ void barrier_rounds(device_handle h, int* slots, int* errors) {
  Scope scope;
  for (int r = 1; r <= kRounds; ++r) {
    const bool writer = Scope::rank() == Scope::size() - 1;
    if (writer)
      for (int pe = 0; pe < h.n_pes; ++pe) p(h, slots + (r % 2) * h.n_pes + h.pe, r, pe);
    barrier_all(scope, h);
    // Every PE's round-r value is here. (Alternating rows: round r+1 writes the other row, so a fast
    // PE cannot overwrite what a slow one still checks.)
    if (writer)
      for (int pe = 0; pe < h.n_pes; ++pe)
        if (reinterpret_cast<volatile int*>(slots)[(r % 2) * h.n_pes + pe] != r) atomicAdd(errors, 1);
    barrier_all(scope, h);
  }
}

template <typename Scope>
void check_barrier(dim3 blocks, dim3 threads) {
  shoal::world& w = *the_world();
  int* slots = static_cast<int*>(w.calloc(2 * w.n_pes(), sizeof(int)));
  int* errors = nullptr;
  ASSERT_EQ(cudaMalloc(&errors, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(errors, 0, sizeof(int)), cudaSuccess);
  barrier_rounds<Scope><<<blocks, threads>>>(w.device_handle(), slots, errors);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int got = -1;
  ASSERT_EQ(cudaMemcpy(&got, errors, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, 0);
  barrier_all(w);
  cudaFree(errors);
  w.free(slots);
}

TEST(Barrier, ThreadScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_barrier<thread_scope>(1, 1);
}
TEST(Barrier, WarpScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_barrier<warp_scope>(1, 32);
}
TEST(Barrier, BlockScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_barrier<block_scope>(1, 256);
}
TEST(Barrier, GridScope) {
  SHOAL_REQUIRE_WORLD(1);
  check_barrier<grid_scope>(16, 128);
}
// The scope's leader fences and announces, and its last thread writes: in multi-dimensional launches the
// two are found through the linear thread and CTA indices.
TEST(Barrier, BlockAndGridScopeInMultiDimensionalLaunches) {
  SHOAL_REQUIRE_WORLD(1);
  check_barrier<block_scope>(1, dim3(7, 5, 3));
  check_barrier<grid_scope>(dim3(3, 2), dim3(16, 4, 2));
}

// grid_sync alone: every round each thread writes its slot, and after the meeting reads, with plain loads,
// the slot of the same thread in another CTA (another one each round).
__global__ void grid_sync_rounds(device_handle h, std::uint64_t* slots, int rounds, int* errors) {
  const unsigned mine = blockIdx.x * blockDim.x + threadIdx.x;
  for (int r = 1; r <= rounds; ++r) {
    slots[mine] = std::uint64_t(r) << 32 | mine;
    grid_sync(h);
    const unsigned other = (blockIdx.x + 1 + r % gridDim.x) % gridDim.x * blockDim.x + threadIdx.x;
    if (slots[other] != (std::uint64_t(r) << 32 | other)) atomicAdd(errors, 1);
    grid_sync(h);  // nobody writes round r + 1 before every read of round r
  }
}

// Kernels of different grid sizes one after another: each must find the meeting word with no arrivals
// left by the one before.
TEST(Barrier, GridSyncAcrossGridSizes) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  constexpr int kThreads = 128;
  int device = 0, sms = 0, per_sm = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_sync_rounds, kThreads, 0), cudaSuccess);
  const unsigned resident = unsigned(sms * per_sm);  // under MPS: this PE's share
  std::uint64_t* slots = nullptr;
  int* errors = nullptr;
  ASSERT_EQ(cudaMalloc(&slots, std::size_t(resident) * kThreads * sizeof(std::uint64_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&errors, sizeof(int)), cudaSuccess);
  for (unsigned blocks : {1u, 3u, 32u, 7u, resident, 2u}) {
    blocks = std::min(blocks, resident);
    ASSERT_EQ(cudaMemset(errors, 0, sizeof(int)), cudaSuccess);
    grid_sync_rounds<<<blocks, kThreads>>>(w.device_handle(), slots, 200, errors);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    int got = -1;
    ASSERT_EQ(cudaMemcpy(&got, errors, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, 0) << blocks << " CTAs";
  }
  EXPECT_EQ(cudaFree(errors), cudaSuccess);
  EXPECT_EQ(cudaFree(slots), cudaSuccess);
}

TEST(Barrier, OnStreamAndHostInterleaved) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  auto* value = static_cast<int*>(w.calloc(w.n_pes(), sizeof(int)));
  int* mine = nullptr;  // stream-ordered copies need device or pinned memory
  ASSERT_EQ(cudaMallocHost(&mine, sizeof(int)), cudaSuccess);
  int pageable = 0;
  EXPECT_THROW(put_on_stream(w, value, &pageable, sizeof(int), 0, s), shoal::error);
  for (int r = 1; r <= 20; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    *mine = r * 10 + w.pe();
    for (int pe = 0; pe < w.n_pes(); ++pe) put_on_stream(w, value + w.pe(), mine, sizeof(int), pe, s);
    barrier_all_on_stream(w, s);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<int> got(w.n_pes());
    ASSERT_EQ(cudaMemcpy(got.data(), value, got.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int pe = 0; pe < w.n_pes(); ++pe) EXPECT_EQ(got[pe], r * 10 + pe) << "round " << r;
    barrier_all(w);
  }
  cudaStreamDestroy(s);
  cudaFreeHost(mine);
  w.free(value);
}

__global__ void put_to_pe(device_handle h, std::uint8_t* dst, const std::uint8_t* src, std::size_t n, int pe) {
  put_nbi(grid, h, dst, src, n, pe);
}

// `rounds` rounds on stream `s`: a kernel puts fresh seeded data (1 MiB + 3 bytes) into the next PE's inbox
// with no quiet, then `order(round)` enqueues what must make those puts visible at the next PE; this PE
// then copies its own inbox on `s` and checks it holds the previous PE's data of that round.
template <typename Order>
void check_kernel_puts_ordered_by(shoal::world& w, cudaStream_t s, std::uint64_t seed, int rounds, Order order) {
  const std::size_t n = (std::size_t{1} << 20) + 3;
  auto* inbox = static_cast<std::uint8_t*>(w.malloc(n));
  std::uint8_t* src = nullptr;
  std::uint8_t* seen = nullptr;
  ASSERT_EQ(cudaMalloc(&src, n), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&seen, n), cudaSuccess);
  barrier_all(w);
  for (int round = 0; round < rounds; ++round) {
    upload(src, random_bytes(seed + round * 8 + w.pe(), n));
    put_to_pe<<<16, 256, 0, s>>>(w.device_handle(), inbox, src, n, next_pe(w));
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    order(round);
    ASSERT_EQ(cudaMemcpyAsync(seen, inbox, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
    barrier_all_on_stream(w, s);  // the peer's next round writes my inbox only after I have copied it
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const std::vector<std::uint8_t> got(seen, seen + n);
    EXPECT_EQ(first_mismatch(got, random_bytes(seed + round * 8 + prev_pe(w), n)), -1) << "round " << round;
  }
  barrier_all(w);
  cudaFreeHost(seen);
  cudaFree(src);
  w.free(inbox);
}

// A barrier on the stream alone must make a kernel's earlier puts visible at their target. Rounds take
// turns: barrier_all_on_stream called directly, the same barrier replayed from a captured graph (direct and
// captured calls mix), and the world team's barrier_on_stream.
TEST(Barrier, OnStreamCompletesEarlierKernelPuts) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  barrier_all_on_stream(w, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  check_kernel_puts_ordered_by(w, s, 7000, 30, [&](int round) {
    if (round % 3 == 0)
      barrier_all_on_stream(w, s);
    else if (round % 3 == 1)
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    else
      barrier_on_stream(world_team(w), s);
  });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// A signal add on the stream, with no barrier, must make the kernel's earlier puts to the same PE visible
// there: the receiver's kernel-form wait (cmp::gt) on the stream precedes its copy. Both stream operations
// are launched overlapping the kernel before them (SHOAL_COLL_PDL).
TEST(Stream, SignalAddCompletesEarlierKernelPuts) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  auto* sig = static_cast<std::uint64_t*>(w.calloc(1, sizeof(std::uint64_t)));
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  constexpr int kRoundsOfAdds = 30;
  check_kernel_puts_ordered_by(w, s, 8000, kRoundsOfAdds, [&](int round) {
    quiet_on_stream(w, s);  // enqueues nothing within a node; across nodes the proxy's puts complete here
    signal_op_on_stream(w, sig, 1, sig_op::add, next_pe(w), s);
    signal_wait_until_on_stream(w, sig, cmp::gt, std::uint64_t(round), s);
  });
  std::uint64_t count = 0;
  ASSERT_EQ(cudaMemcpy(&count, sig, sizeof(count), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(count, std::uint64_t(kRoundsOfAdds));
  barrier_all(w);
  cudaStreamDestroy(s);
  w.free(sig);
}

}  // namespace
}  // namespace shoal::gpu_test
