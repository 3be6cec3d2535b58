// Barriers inside a kernel.
//   barrier_all(scope, h)  quiet, then wait until every PE has entered the same barrier: on return all
//                          RMA that any PE issued before its barrier_all is complete and visible.
//   sync_all(scope, h)     the meeting alone, without the quiet.
//   grid_sync(h)           all CTAs of this PE's kernel meet (requires every CTA to be resident).
// Only one barrier may be in flight per PE at a time (one block, or the grid form); PEs match barriers
// by count, through epochs that only grow, so nothing is ever reset.
#pragma once

#include <cuda/atomic>

#include "shoal/dev/ordering.cuh"
#include "shoal/dev/rma.cuh"
#include "shoal/dev/wait.cuh"

namespace shoal {

namespace detail {

// How a meeting orders the scope's earlier writes before its arrival stores.
enum class earlier_writes {
  unordered,     // sync_all: the meeting alone, no completion promised
  quiet_first,   // the leader's quiet (one system fence), then relaxed arrival stores
  release_each,  // each arrival store a release, no separate fence: cheaper at a kernel's very start,
                 // dearer inside a running kernel (perf notes 69). With a proxy it is quiet_first, since
                 // the proxy's requests complete only through quiet.
};

// A meeting of all PEs on a set of flags: `flags` (symmetric, n_pes words) and `epoch_word` (this PE's count
// of meetings on them). The kernel forms use the device barrier's set, barrier_all_on_stream its own.
// kProxied: some PE is reached through the proxy (h.proxy is set). Without one the barrier is compiled
// without the proxy's paths, which cost it 0.3 µs when inlined beside the fence (perf notes 31, 33).
template <bool kProxied, typename Scope>
__device__ inline void meet_all_pes(Scope, const device_handle& h, earlier_writes ordering, std::uint64_t* flags,
                                    std::uint64_t* epoch_word) {
  if (kProxied && ordering == earlier_writes::release_each) ordering = earlier_writes::quiet_first;
  Scope::sync();
  // Only this function's leader writes the epoch word, between scope barriers: a relaxed load suffices.
  std::uint64_t epoch = load_relaxed(epoch_word);
  // One system fence (quiet) orders every earlier write of the scope before the arrival stores below,
  // which can then be relaxed. (A release fence instead of quiet measured the same: docs/perf-notes.md.)
  if (ordering == earlier_writes::quiet_first && Scope::leader()) {
    if constexpr (kProxied)
      quiet(h);
    else
      cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_system);  // quiet without a proxy
  }
  // The epoch's load stays in flight under the fence: without this the compiler may use the value before
  // the fence (it did once quiet gained its proxy branch), and the two latencies add up (perf notes 31).
  detail::use_after_here(epoch);
  epoch += 1;
  Scope::sync();
  // Announce: write my arrival into flag[my_pe] on every PE (through the proxy on other nodes). A release
  // store is cumulative over the scope's earlier writes, which the scope barrier above ordered before it.
  for (int pe = Scope::rank(); pe < h.n_pes; pe += Scope::size()) {
    std::uint64_t* flag;
    if constexpr (kProxied) {
      flag = ptr(h, flags + h.pe, pe);
      if (flag == nullptr) {
        proxy_signal(h, flags + h.pe, epoch, sig_op::set, pe);
        continue;
      }
    } else {
      flag = remote(h, flags + h.pe, pe);
      // Built without a network, a job across nodes has no proxy: say so instead of storing through null.
      if (flag == nullptr) [[unlikely]]
        proxy_of(h, "barrier_all", pe);
    }
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> arrival(*flag);
    if (ordering == earlier_writes::release_each)
      arrival.store(epoch, cuda::memory_order_release);
    else
      arrival.store(epoch, cuda::memory_order_relaxed);
  }
  // The next barrier reads the epoch only after its opening scope barrier, so it can be stored now.
  if (Scope::leader())
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*epoch_word).store(epoch, cuda::memory_order_relaxed);
  // Wait: every PE's arrival at this epoch (or a later one: a fast PE may already be in the next).
  for (int pe = Scope::rank(); pe < h.n_pes; pe += Scope::size()) wait_until(h, flags + pe, cmp::ge, epoch);
  Scope::sync();
}

}  // namespace detail

// One word counts the meetings: CTAs arrived at the current one in its low 32 bits, meetings completed
// above them. A CTA arrives with one atomic add, whose result says which meeting it waits for; the last to
// arrive adds what turns the n arrivals into one completed meeting. So the last CTA's path to releasing the
// others is two atomics, with no load before them (perf notes 63).
__device__ inline void grid_sync(const device_handle& h) {
  __syncthreads();
  if (block_scope::leader()) {
    constexpr std::uint64_t kMeeting = std::uint64_t{1} << 32;
    const std::uint64_t n = grid_scope::n_blocks();
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> meetings(h.sync->grid_meetings);
    // acq_rel: releases this CTA's writes (the __syncthreads above orders its threads' before them) and,
    // for the last CTA, acquires every other CTA's, which its release below passes on to the waiters.
    const std::uint64_t before = meetings.fetch_add(1, cuda::memory_order_acq_rel);
    if ((before & (kMeeting - 1)) == n - 1) {
      meetings.fetch_add(kMeeting - n, cuda::memory_order_release);
    } else {
      std::uint64_t seen = before;
      const bool ok = detail::spin_until(
          [&] { return ((seen = meetings.load(cuda::memory_order_acquire)) ^ before) >= kMeeting; }, h.wait_timeout_ns);
      if (!ok)
        detail::report_wait_timeout(h, "grid_sync: CTAs arrived (are all CTAs resident?)", &h.sync->grid_meetings,
                                    seen & (kMeeting - 1), "==", n);
    }
  }
  __syncthreads();
}

namespace detail {
// meet_all_pes on the device barrier's flags, compiled with the proxy's paths only when there is a proxy.
template <typename Scope>
__device__ inline void meet_all_pes_on_device_flags(Scope scope, const device_handle& h, earlier_writes ordering) {
  if (h.proxy != nullptr)
    meet_all_pes<true>(scope, h, ordering, h.device_barrier_flags, &h.sync->device_barrier_epoch);
  else
    meet_all_pes<false>(scope, h, ordering, h.device_barrier_flags, &h.sync->device_barrier_epoch);
}

// At grid scope the CTAs meet, CTA 0 meets the other PEs, and the CTAs meet again; at smaller scopes
// the scope meets the other PEs directly. With earlier_writes::quiet_first, every thread's earlier RMA is
// completed.
template <typename Scope>
__device__ inline void meet(Scope scope, const device_handle& h, earlier_writes ordering) {
  if constexpr (std::is_same_v<Scope, grid_scope>) {
    // grid_sync orders every thread's earlier writes before CTA 0's meeting, whose leader's one fence
    // (quiet) is cumulative over them: no thread needs a fence of its own (perf notes 37).
    grid_sync(h);
    if (grid_scope::block_rank() == 0) meet_all_pes_on_device_flags(block, h, ordering);
    grid_sync(h);
  } else {
    meet_all_pes_on_device_flags(scope, h, ordering);
  }
}
}  // namespace detail

template <typename Scope>
__device__ inline void barrier_all(Scope scope, const device_handle& h) {
  detail::meet(scope, h, detail::earlier_writes::quiet_first);
}

template <typename Scope>
__device__ inline void sync_all(Scope scope, const device_handle& h) {
  detail::meet(scope, h, detail::earlier_writes::unordered);
}

}  // namespace shoal
