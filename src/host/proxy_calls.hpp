// Host-initiated and stream-ordered RMA to PEs on other nodes. Each is a one-thread kernel making the
// device call, so the request goes through the same ring as kernels' requests, in stream order, and a
// CUDA graph can capture it. fmt-free, for the .cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "host/world_impl.hpp"
#include "shoal/types.hpp"

namespace shoal::detail {

// Complete when the stream reaches the end of the kernel: the put's source may be reused and its data
// is at `pe`; the get's data is in `dst`; the put_signal's data and signal are applied at `pe`.
void proxy_put_on_stream(world::impl& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream);
void proxy_get_on_stream(world::impl& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream);
void proxy_put_signal_on_stream(world::impl& w, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                                std::uint64_t value, sig_op op, int pe, cudaStream_t stream);
// Posted in stream order; applied at `pe` after this PE's earlier requests to it, complete at a quiet.
void proxy_signal_on_stream(world::impl& w, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe,
                            cudaStream_t stream);
// Every request this PE posted before the kernel runs is complete when it ends.
void proxy_quiet_on_stream(world::impl& w, cudaStream_t stream);

// Loads these kernels' module (called when the proxy starts): see cuda_local_memory.cu on lazy loading.
void preload_proxy_kernels();

// Waits for `stream`. When it failed because a proxy request failed (a kernel traps then), throws the
// proxy's own error, which names the peer, instead of the CUDA error.
void proxy_synchronize(world::impl& w, cudaStream_t stream);

}  // namespace shoal::detail
