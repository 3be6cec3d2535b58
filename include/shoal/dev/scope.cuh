// Cooperation scopes of the device API: shoal::thread, shoal::warp, shoal::block, shoal::grid.
// A call taking a scope is made by every thread of that scope with the same arguments; the work is
// split among them. Each scope type answers rank() (this thread's index in the scope), size() and sync().
#pragma once

#include <cuda_runtime.h>

#include <cstdio>

namespace shoal {

struct thread_scope {
  __device__ static unsigned rank() { return 0; }
  __device__ static unsigned size() { return 1; }
  __device__ static void sync() {}
  __device__ static bool leader() { return true; }
};

namespace detail {
// This thread's lane in its warp. Not volatile: a thread's lane never changes, so the compiler may read it
// once and keep it (a volatile read sat between a barrier's __syncthreads and its fence: +0.04 µs, perf
// notes 64).
__device__ inline unsigned lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

#ifdef SHOAL_DEBUG
// Grid scope numbers its threads in 32 bits: a grid of 2^32 threads or more would wrap its ranks and size (a
// size of 0 spins forever in the copy loops). No handle reaches here, so the report has no PE.
__device__ inline void check_grid_fits() {
  const unsigned long long threads = 1ull * gridDim.x * gridDim.y * gridDim.z * blockDim.x * blockDim.y * blockDim.z;
  if (threads > 0xffffffffull) {
    printf("shoal: device check failed at %s:%d: a grid-scope call in a grid of %llu threads (at most 2^32 - 1)\n",
           __FILE__, __LINE__, threads);
    __trap();
  }
}
#endif
}  // namespace detail

// A full, converged warp (all 32 lanes).
struct warp_scope {
  __device__ static unsigned rank() { return detail::lane_id(); }
  __device__ static unsigned size() { return 32; }
  __device__ static void sync() { __syncwarp(); }
  __device__ static bool leader() { return rank() == 0; }
};

// All threads of the CTA. Assumes a 1-D or multi-D block; rank is the linear thread index.
struct block_scope {
  __device__ static unsigned rank() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
  __device__ static unsigned size() { return blockDim.x * blockDim.y * blockDim.z; }
  __device__ static void sync() { __syncthreads(); }
  // Thread 0 (rank() == 0), tested lane first so that the compiler sees a single lane. Tested as
  // rank() == 0, ptxas wrapped every atomic a leader makes (grid_sync's arrival, the proxy's slot
  // reservations) in a warp-wide aggregation: vote, popcount, shuffles and a CTA membar (perf notes 64).
  __device__ static bool leader() { return detail::lane_id() == 0 && rank() < 32; }
};

// All threads of all CTAs of the kernel, at most 2^32 - 1 of them (ranks are 32-bit; SHOAL_DEBUG checks). sync() here
// is only the CTA's barrier: calls that need the whole grid to meet use shoal::grid_sync(h), which requires every CTA
// to be resident (a cooperative launch, or no more CTAs than fit on the GPU at once).
struct grid_scope {
  __device__ static unsigned block_rank() { return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); }
  __device__ static unsigned n_blocks() { return gridDim.x * gridDim.y * gridDim.z; }
  __device__ static unsigned rank() { return block_rank() * block_scope::size() + block_scope::rank(); }
  __device__ static unsigned size() {
#ifdef SHOAL_DEBUG
    detail::check_grid_fits();
#endif
    return n_blocks() * block_scope::size();
  }
  __device__ static void sync() { __syncthreads(); }
  __device__ static bool leader() { return block_rank() == 0 && block_scope::leader(); }
};

inline constexpr thread_scope thread{};
inline constexpr warp_scope warp{};
inline constexpr block_scope block{};
inline constexpr grid_scope grid{};

}  // namespace shoal
