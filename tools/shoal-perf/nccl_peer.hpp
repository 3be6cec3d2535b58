// NCCL side by side: the same transfer through NCCL (ncclSend/ncclRecv, PE 0 -> PE 1) or the same
// collective in the same run, timed the same way, so every shoal figure has its incumbent beside it. Compiled in when the build found
// NCCL (SHOAL_PERF_HAVE_NCCL); without it open() returns null and the NCCL columns stay empty.
// NVLink multicast is never used: main sets NCCL_NVLS_ENABLE=0 before anything starts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "harness.hpp"
#include "shoal/coll_model.hpp"

namespace shoal::perf {

class nccl_peer {
 public:
  // Whether this build has NCCL, and its version ("" when not).
  static bool compiled_in();
  // Collective: one communicator over all PEs (the id travels through the world's bootstrap). Returns
  // null when the build has no NCCL; throws std::runtime_error naming the call when NCCL fails.
  static std::unique_ptr<nccl_peer> open(context& ctx);
  ~nccl_peer();
  nccl_peer(const nccl_peer&) = delete;
  nccl_peer& operator=(const nccl_peer&) = delete;

  std::string version() const;

  // Collective. PE 0 sends `bytes` to PE 1 (one ncclSend/ncclRecv group each), back to back on the
  // context's stream with the same buffer rotation and batch timing as shoal's put; checked the same way.
  // Time per message, the slower of the two PEs.
  measurement measure_send_recv(context& ctx, std::uint64_t bytes);

  // Whether NCCL has the collective: all but barrier. all-reduce (ncclAllReduce), reduce-scatter
  // (ncclReduceScatter) on bfloat16 sum, all-gather (ncclAllGather) for fcollect, ncclBroadcast from
  // PE 0, and alltoall as one group of ncclSend/ncclRecv to and from every other PE plus a local
  // cudaMemcpyAsync of the PE's own block. The alltoall is not measured from 1 MiB blocks: its
  // graph-captured send/recv never completed there on 2 x H200 (NCCL 2.28.9), with or without a send to
  // self; measure_collective then returns no figure and a note saying so.
  static bool has(collective op);
  // Collective. The collective of `bytes` (sizes as in coll.hpp), under CUDA graph replay (its best
  // case): one eager call (NCCL connects outside the capture), graphs of back-to-back calls over the
  // rotated buffers as shoal's graph rows (coll_batch_graphs), timed as shoal's collectives
  // (time_coll_batches), then one eager call checked against the host reference (check_coll). Time per
  // call, the slowest PE.
  measurement measure_collective(context& ctx, collective op, std::uint64_t bytes);

  struct impl;

 private:
  explicit nccl_peer(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

}  // namespace shoal::perf
