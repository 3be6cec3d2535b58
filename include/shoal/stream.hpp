// Stream-ordered RMA, signals, waits and barriers: each call enqueues work on `stream` and returns at
// once; the operation happens in stream order and completes before later work on that stream starts.
// All of them can be captured in a CUDA graph and replayed. Within a node data moves with the copy engines;
// signal set/wait use stream memory operations (cuStreamWriteValue64 / cuStreamWaitValue64), which the host
// enqueues faster than a kernel; forms that memory operations cannot express launch a one-thread kernel, and
// so does a signal set captured in a graph, where it replays faster than a stream write. To a PE on
// another node, each call is a one-thread kernel that posts it to the proxy (see quiet_on_stream).
// A local buffer (put's src, get's dst) must be device or pinned host memory, all `bytes` of it; one shorter
// than the copy is refused when the call enqueues, as shoal/host_rma.hpp says (errc::invalid_argument).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "shoal/types.hpp"
#include "shoal/world.hpp"

namespace shoal {

void put_on_stream(world& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream);
void get_on_stream(world& w, void* dst, const void* src, std::size_t bytes, int pe, cudaStream_t stream);

// The data is visible at `pe` before the signal changes there.
void put_signal_on_stream(world& w, void* dst, const void* src, std::size_t bytes, std::uint64_t* sig,
                          std::uint64_t value, sig_op op, int pe, cudaStream_t stream);
void signal_op_on_stream(world& w, std::uint64_t* sig, std::uint64_t value, sig_op op, int pe, cudaStream_t stream);

// Later work on `stream` starts once this PE's `*sig` compares true against `value`. cmp::ge and cmp::eq
// use a stream wait (ge compares as (int64_t)(*sig - value) >= 0, right for counters that grow);
// other comparisons launch a one-thread kernel. A kernel-form wait traps after SHOAL_WAIT_TIMEOUT.
void signal_wait_until_on_stream(world& w, std::uint64_t* sig, cmp op, std::uint64_t value, cudaStream_t stream);

// Everything enqueued on `stream` before this is complete and visible at its targets before anything
// enqueued after it runs. Within a node stream order already gives this for shoal's stream operations and
// for kernels (a kernel's stores are performed when it completes), so nothing is enqueued; when the job
// spans nodes it enqueues a kernel that waits for the proxy's requests.
void quiet_on_stream(world& w, cudaStream_t stream);

// All PEs meet in stream order: later work on `stream` starts once every PE's stream reached its
// barrier, and every PE's work before it is complete. It is a one-warp kernel whose epochs live in device
// memory, so it may be captured in a CUDA graph and the graph replayed any number of times, and captured
// and direct calls mix freely. Within a node its launch overlaps the previous kernel's (SHOAL_COLL_PDL) and
// it has flags of its own: a barrier_all in a kernel on another stream does not take part in it. When the
// job spans nodes it is the device barrier (barrier_all at warp scope), which reaches peers through the
// proxy and shares the in-kernel barrier's flags.
void barrier_all_on_stream(world& w, cudaStream_t stream);

}  // namespace shoal
