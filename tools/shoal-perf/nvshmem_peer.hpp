// NVSHMEM side by side: the same operation through NVSHMEM in the same run, so the rows shoal sets out to
// win against NVSHMEM carry its figure from the same machine and minute. NVSHMEM runs on a symmetric heap
// of its own (nvshmem_malloc); each measurement rotates its buffers, times and checks as shoal's
// measurement of the same name does (benches.hpp, coll.hpp), and the check moves the data through
// shoal's buffers so that the same checkers judge both.
//
// Compiled in when the build found NVSHMEM (SHOAL_PERF_HAVE_NVSHMEM). NVSHMEM's device API needs
// relocatable device code, so this file builds into a library of its own; without NVSHMEM open() returns
// null and the NVSHMEM columns stay empty. NVLink multicast is never used: main sets
// NVSHMEM_DISABLE_NVLS=1 before anything starts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "benches.hpp"
#include "coll.hpp"
#include "harness.hpp"

namespace shoal::perf {

class nvshmem_peer {
 public:
  // Whether this build has NVSHMEM.
  static bool compiled_in();
  // Collective: NVSHMEM over all PEs, bootstrapped from a unique id sent through the world's bootstrap.
  // Returns null when the build has no NVSHMEM; throws std::runtime_error naming the call when NVSHMEM
  // fails. Sets NVSHMEM_SYMMETRIC_SIZE, when unset, to hold buffers of 512 MiB; a measurement whose
  // buffers it cannot hold throws std::runtime_error saying so.
  static std::unique_ptr<nvshmem_peer> open(context& ctx);
  ~nvshmem_peer();  // frees the buffers and finalizes NVSHMEM (collective)
  nvshmem_peer(const nvshmem_peer&) = delete;
  nvshmem_peer& operator=(const nvshmem_peer&) = delete;

  std::string version() const;

  // Each is collective and mirrors shoal's function of the same name.
  // Block scope only (nvshmemx_putmem_nbi_block / getmem), one contiguous slice per CTA, one quiet per
  // kernel (NVSHMEM's perftest method), or one after every message with --quiet each, as shoal's row.
  measurement measure_device_rma(context& ctx, const rma_case& c);
  // nvshmem_uint64_p + wait_until, or putmem_signal (thread) / putmem_signal_warp + signal_wait_until.
  measurement measure_pingpong(context& ctx, pingpong_kind kind, scope_kind scope, std::uint64_t bytes);
  measurement measure_fetch_add(context& ctx);          // nvshmem_uint64_atomic_fetch_add
  measurement measure_barrier_on_stream(context& ctx);  // nvshmemx_barrier_all_on_stream
  measurement measure_barrier_in_kernel(context& ctx);  // nvshmemx_barrier_all_block, one 32-thread CTA

  // Whether NVSHMEM has the collective in this mode: every collective on a stream (a loop of
  // nvshmemx_*_on_stream calls; barrier is nvshmemx_barrier_on_stream), the all-reduce at block scope
  // (nvshmemx_bfloat16_sum_reduce_block in one CTA). Graph replay and grid scope: none.
  static bool has(collective op, coll_mode mode);
  // Collective. Sizes as in coll.hpp; bfloat16 sum for the reductions; time per call, the slowest PE.
  measurement measure_coll(context& ctx, collective op, std::uint64_t bytes, coll_mode mode);

  struct impl;

 private:
  explicit nvshmem_peer(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

}  // namespace shoal::perf
