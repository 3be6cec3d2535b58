// Built with SHOAL_DEBUG: runs one deliberate misuse of the device API and lets it trap, so a ctest can
// check the report names the file, the PE and the bad value. Modes: bad-pe, outside-heap, misaligned-signal,
// overlong-put (past the heap's slot), past-mapped-put (past what is mapped, inside the slot), grid-too-large (grid
// scope in 2^32 threads), team-after-destroy (a barrier through a destroyed team's handle), wait-timeout (a signed
// word: the report prints it signed), vector-timeout (one timeout for a whole vector wait); and peer-dies (2 PEs on
// different nodes, e.g. SHOAL_EMULATE_NODES=2): PE 1 vanishes while PE 0 is putting to it through the proxy, and PE 0
// must end with a shoal::error that names PE 1, not hang. And ll-only-across-nodes (2 PEs on different nodes): an
// all-reduce with shoal::ll_only on a team that spans nodes must report that and trap (a check of every build, not only
// SHOAL_DEBUG's). And beyond-mapped-across-nodes: a put to the other node at an address inside the heap's slot but past
// what is mapped must be refused by the proxy, naming the range (a release build has no device check to stop it). And
// team-outlives-world, no misuse: a team destroyed after its world must let go of it (exit 0) rather than free its
// state in the finalized heap. And work-queues-differ (4 PEs on 2 nodes, e.g. SHOAL_EMULATE_NODES=2, with
// SHOAL_ALGO_REDUCE=hierarchical): PE 1 starts with fewer hardware work queues than the hierarchical all-reduce
// needs, and the all-reduce must be refused on every PE, naming PE 1 (exit 0).
// Exits 77 (skip) without a GPU, or for the modes across nodes when PE 1 is reachable by load/store.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "shoal/device.cuh"
#include "shoal/shoal.hpp"

namespace {

__global__ void bad_pe_kernel(shoal::device_handle h, int* sym) { shoal::p(h, sym, 1, h.n_pes + 3); }

__global__ void outside_heap_kernel(shoal::device_handle h, int* not_symmetric) { shoal::p(h, not_symmetric, 1, h.pe); }

// A signed word, so that the report must print the awaited value as signed (-42, not 18446744073709551574).
__global__ void wait_timeout_kernel(shoal::device_handle h, long long* word) {
  shoal::wait_until(h, word, shoal::cmp::eq, -42ll);  // nobody ever writes -42
}

// A vector wait has one timeout for the whole vector: CTA 1 sets the words one by one, each
// `gap_ns` after the last (less than the timeout), and CTA 0 must trap once the timeout has passed in all,
// before the last word arrives.
__global__ void vector_timeout_kernel(shoal::device_handle h, unsigned long long* words, int n, std::uint64_t gap_ns) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 1) {
    for (int i = 0; i < n; ++i) {
      const std::uint64_t start = shoal::detail::global_timer_ns();
      while (shoal::detail::global_timer_ns() - start < gap_ns) {
      }
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(words[i]).store(1, cuda::memory_order_release);
    }
    return;
  }
  shoal::wait_until_all(h, words, std::size_t(n), nullptr, shoal::cmp::eq, 1ull);
  std::printf("wait_until_all returned without a timeout\n");
}

// The heap's slot reaches past what is mapped (h.heap_capacity) up to SHOAL_HEAP_MAX_SIZE. A debug build's
// device check stops such a put before it leaves the kernel (past-mapped-put), so this calls the proxy's entry
// directly: the proxy's own check is what guards a release build.
__global__ void beyond_mapped_kernel(shoal::device_handle h, int* sym) {
  auto* beyond = reinterpret_cast<int*>(h.heap_base + h.heap_capacity + 4096);
  shoal::detail::proxy_scope_transfer<shoal::thread_scope>(h, shoal::detail::proxy_op::put, beyond, sym, 16, 1 - h.pe,
                                                           /*wait=*/true);
}

// A put to a PE on this node that starts in the heap and runs 4 KiB past what is mapped (inside the slot's
// reserved address space): the check names the byte count, where the copy would fault with no file or line.
__global__ void past_mapped_put_kernel(shoal::device_handle h, int* sym, const int* src) {
  const std::size_t offset = std::size_t(reinterpret_cast<std::byte*>(sym) - h.heap_base);
  shoal::put_bytes(shoal::thread, h, sym, src, std::size_t(h.heap_capacity) - offset + 4096, 1 - h.pe);
}

// A signal word 4 bytes off its alignment: the check names the misalignment before the atomic faults.
__global__ void misaligned_signal_kernel(shoal::device_handle h, int* sym) {
  auto* word = reinterpret_cast<std::uint64_t*>(reinterpret_cast<std::byte*>(sym) + 4);
  shoal::signal_op(h, word, 1, shoal::sig_op::add, h.pe);
}

// A put that starts in the heap and runs past its slot: the report names the byte count, not the start.
__global__ void overlong_put_kernel(shoal::device_handle h, int* sym, const int* src) {
  shoal::put_bytes(shoal::thread, h, sym, src, std::size_t(h.slot_stride), h.pe);
}

// A grid-scope put in a grid of 2^32 threads (2^22 CTAs of 1024): grid scope's 32-bit size would be 0.
__global__ void grid_too_large_kernel(shoal::device_handle h, int* sym, const int* src) {
  shoal::put_bytes(shoal::grid, h, sym, src, 64, h.pe);
}

// A team barrier through a handle taken before its team was destroyed.
__global__ void team_barrier_kernel(shoal::team_handle t) { shoal::barrier(shoal::block, t); }

// A put whose source is a CTA's shared memory, to a PE on another node: the proxy would copy from an
// address that means nothing outside the SM, so the call traps naming the buffer.
__global__ void shared_source_kernel(shoal::device_handle h, int* sym) {
  __shared__ int staged[64];
  staged[threadIdx.x] = int(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) shoal::put(shoal::thread, h, sym, staged, 64, 1 - h.pe);
}

__global__ void ll_only_kernel(shoal::team_handle t, float* dst, const float* src) {
  shoal::reduce(shoal::grid, t, shoal::op::sum, dst, src, 256, shoal::ll_only);
}

// PE 1 leaves without finalizing (exit status 0, so the launcher does not stop PE 0 first) while PE 0
// puts 1 MiB blocks to it in a loop; PE 0 reports what the library told it and exits 1, or exits 0 if it
// was never told (the check then fails: the pattern is not found).
int peer_dies(shoal::world& w) {
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  if (w.n_pes() != 2) {
    std::printf("SKIP: peer-dies needs 2 PEs\n");
    return 77;
  }
  auto* sym = static_cast<std::byte*>(w.malloc(kBlock));
  if (w.ptr(sym, 1 - w.pe()) != nullptr) {
    std::printf("SKIP: the other PE is reachable by load/store; run with SHOAL_EMULATE_NODES=2\n");
    return 77;
  }
  std::vector<std::byte> block(kBlock, std::byte{7});
  shoal::barrier_all(w);
  if (w.pe() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::printf("PE 1 leaves now\n");
    std::fflush(stdout);
    std::_Exit(0);
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < 100000; ++i) shoal::put(w, sym, block.data(), kBlock, 1);
  } catch (const shoal::error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("PE 0 told after %.1f s: %s\n", s, e.what());
    std::fflush(stdout);
    std::_Exit(1);
  }
  std::printf("PE 0 was never told that PE 1 left\n");
  std::fflush(stdout);
  std::_Exit(0);
}

// A team declared before its world, as a class member may be: the world finalizes first. The team must let
// go of it (report no members, throw on use, free nothing) instead of freeing its state in the finalized
// world's heap when it goes. Exits 0 when it did, 1 when the team still claimed to be valid.
int team_outlives_world() {
  shoal::team t;
  {
    shoal::world w = shoal::init();
    t = shoal::split_strided(w, shoal::world_team(w), 0, 1, w.n_pes());
    if (!t.valid() || t.size() != w.n_pes()) return 2;
  }
  bool detached = !t.valid() && t.size() == 0;
  try {
    (void)t.device_handle();
    detached = false;
  } catch (const shoal::error&) {
  }
  std::printf("team after its world: %s\n", detached ? "let go" : "still claims its world");
  std::fflush(stdout);
  return detached ? 0 : 1;  // t's destructor runs here, after the world's
}

// PE 1 has 2 hardware work queues, the others 8 (CUDA_DEVICE_MAX_CONNECTIONS, set before init; set on every PE,
// so that MPS's default of 2 does not apply). The choice of the hierarchical all-reduce must come out alike on
// every PE: each refuses the forced form, naming PE 1. Judged from each PE's own count, PE 1 refused while the
// others went into the hierarchical form and waited for it. Exits 0 when this PE refused naming PE 1, else 1.
int work_queues_differ() {
  const char* rank = std::getenv("SHOAL_RANK");
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", rank != nullptr && std::atoi(rank) == 1 ? "2" : "8", 1);
  shoal::world w = shoal::init();
  const int m = shoal::node_team(w).size(), nodes = shoal::same_local_rank_team(w).size();
  if (m < 2 || nodes < 2 || m * nodes != w.n_pes()) {
    std::printf("SKIP: needs the PEs across nodes with at least 2 on each (4 PEs with SHOAL_EMULATE_NODES=2)\n");
    return 77;
  }
  constexpr std::size_t kCount = std::size_t{1} << 20;
  auto* src = static_cast<float*>(w.calloc(kCount, sizeof(float)));
  auto* dst = static_cast<float*>(w.calloc(kCount, sizeof(float)));
  bool refused = false;
  try {
    shoal::reduce_on_stream(shoal::world_team(w), dst, src, kCount, shoal::reduce_op::sum, nullptr);
    std::printf("PE %d ran the all-reduce (%s)\n", w.pe(), cudaGetErrorString(cudaStreamSynchronize(nullptr)));
  } catch (const shoal::error& e) {
    refused = std::strstr(e.what(), "PE 1") != nullptr;
    std::printf("PE %d refused: %s\n", w.pe(), e.what());
  }
  std::fflush(stdout);
  w.free(dst);
  w.free(src);
  return refused ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no GPU\n");
    return 77;
  }
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "team-outlives-world") == 0) return team_outlives_world();
  if (std::strcmp(mode, "work-queues-differ") == 0) return work_queues_differ();
  shoal::world w = shoal::init();
  if (std::strcmp(mode, "peer-dies") == 0) return peer_dies(w);
  auto* sym = static_cast<int*>(w.calloc(512, sizeof(int)));
  const bool across_nodes = std::strcmp(mode, "ll-only-across-nodes") == 0 ||
                            std::strcmp(mode, "beyond-mapped-across-nodes") == 0 ||
                            std::strcmp(mode, "shared-source-across-nodes") == 0;
  if (across_nodes && w.ptr(sym, 1 - w.pe()) != nullptr) {
    std::printf("SKIP: the other PE is reachable by load/store; run with SHOAL_EMULATE_NODES=2\n");
    return 77;
  }
  int* plain = nullptr;
  if (cudaMalloc(&plain, 64) != cudaSuccess) return 2;
  if (std::strcmp(mode, "bad-pe") == 0)
    bad_pe_kernel<<<1, 1>>>(w.device_handle(), sym);
  else if (std::strcmp(mode, "outside-heap") == 0)
    outside_heap_kernel<<<1, 1>>>(w.device_handle(), plain);
  else if (std::strcmp(mode, "wait-timeout") == 0)
    wait_timeout_kernel<<<1, 1>>>(w.device_handle(), reinterpret_cast<long long*>(sym));
  else if (std::strcmp(mode, "vector-timeout") == 0)  // 4 words 0.6 timeouts apart: the timeout passes at the 2nd
    vector_timeout_kernel<<<2, 32>>>(w.device_handle(), reinterpret_cast<unsigned long long*>(sym), 4,
                                     w.device_handle().wait_timeout_ns * 6 / 10);
  else if (std::strcmp(mode, "ll-only-across-nodes") == 0)
    ll_only_kernel<<<2, 128>>>(shoal::world_team(w).device_handle(), reinterpret_cast<float*>(sym),
                               reinterpret_cast<const float*>(sym + 256));
  else if (std::strcmp(mode, "beyond-mapped-across-nodes") == 0)
    beyond_mapped_kernel<<<1, 1>>>(w.device_handle(), sym);
  else if (std::strcmp(mode, "misaligned-signal") == 0)
    misaligned_signal_kernel<<<1, 1>>>(w.device_handle(), sym);
  else if (std::strcmp(mode, "overlong-put") == 0)
    overlong_put_kernel<<<1, 1>>>(w.device_handle(), sym, plain);
  else if (std::strcmp(mode, "team-after-destroy") == 0) {
    shoal::team t = shoal::split_strided(w, shoal::world_team(w), 0, 1, w.n_pes());
    const shoal::team_handle stale = t.device_handle();
    t.destroy();
    team_barrier_kernel<<<1, 32>>>(stale);
  } else if (std::strcmp(mode, "grid-too-large") == 0)
    grid_too_large_kernel<<<1u << 22, 1024>>>(w.device_handle(), sym, plain);
  else if (std::strcmp(mode, "past-mapped-put") == 0)
    past_mapped_put_kernel<<<1, 1>>>(w.device_handle(), sym, plain);
  else if (std::strcmp(mode, "shared-source-across-nodes") == 0)
    shared_source_kernel<<<1, 64>>>(w.device_handle(), sym);
  else {
    std::fprintf(stderr,
                 "usage: %s "
                 "bad-pe|outside-heap|misaligned-signal|overlong-put|past-mapped-put|grid-too-large|team-after-destroy|"
                 "wait-timeout|"
                 "vector-timeout|peer-"
                 "dies|ll-only-across-nodes|"
                 "beyond-mapped-across-nodes|shared-source-across-nodes|team-outlives-world|work-queues-differ\n",
                 argv[0]);
    return 2;
  }
  cudaError_t status = cudaDeviceSynchronize();
  std::printf("kernel ended: %s\n", cudaGetErrorString(status));
  std::fflush(stdout);
  // The context is unusable after a trap: leave without finalizing.
  std::_Exit(status == cudaSuccess ? 0 : 1);
}
