// local_memory for a heap in GPU memory: the proxy engine's reads and writes become copies on one CUDA
// stream of the PE's device, atomics and signal adds one-thread kernels on it, signal sets stream memory
// writes (no SM needed), a flush one event on it (flush() one stream synchronization). Copies use the lent
// pinned payload buffers directly, or go through pinned staging, so they stay asynchronous. Heap offsets resolve
// against the PE's heap base; addresses (the local side of this PE's own requests) are device memory, or host memory
// marked is_host, which the CPU copies: a CUDA copy between two host buffers would wait for every kernel of the device,
// including the one waiting for the request. (Kernels pass device buffers; the host forms mark host buffers.) Used by
// the world when the job spans nodes; fmt-free for the .cu file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/local_memory.hpp"

namespace shoal::detail {

// How many pinned payload buffers to lend (local_memory::lend), and how large each is.
struct payload_buffers {
  std::size_t count = 0;
  std::size_t bytes = 0;
};

// `heap_base` is this PE's heap slot, `heap_bytes` the most it can map; `device` the PE's GPU. The
// object must be used by one thread at a time (the proxy thread); it binds that thread to `device`.
std::unique_ptr<local_memory> make_cuda_local_memory(std::byte* heap_base, std::uint64_t heap_bytes, int device,
                                                     const payload_buffers& lendable);

}  // namespace shoal::detail
