// Hierarchical all-reduce on a stream, for the world team across nodes: reduce-scatter within each node
// (NVLink), all-reduce of each PE's share among the PEs of its local rank on every node (the proxy), then
// all-gather within the node. The network carries 1/m of the data that a flat all-reduce sends it (m PEs
// per node). Pipelined in chunks: the caller's stream runs the node phases, the world's network stream the
// phase across nodes, so one chunk crosses the network while the node reduces the next and gathers the one
// before. Host only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "shoal/coll_model.hpp"
#include "shoal/coll_stream.hpp"
#include "shoal/team.hpp"

namespace shoal::detail {

// The most chunks one call is cut into: each costs three launches and two event hand-overs.
inline constexpr int kMaxHierarchicalChunks = 16;

// How shoal runs a hierarchical all-reduce of `bytes`: in `chunks` pieces (a power of two), predicted to
// take `us` on a stream.
struct hierarchical_plan {
  int chunks = 1;
  double us = 0;
};

// What the choice compares: the predicted on-stream time of the flat one-shot all-reduce over `shape`,
// and the best pipelined plan of the hierarchical one as shoal runs it. Per chunk (each PE's share b):
// the node phases N = 2 launches + reduce-scatter(b) + all-gather(b) on one stream, the network phase
// X = a launch + a flat one-shot among `shape.nodes` PEs on the other. The first chunk pays N + X, every
// later one max(N, X).
double flat_reduce_us(const coll_model_table& table, node_shape shape, std::size_t bytes);
hierarchical_plan plan_hierarchical_reduce(const coll_model_table& table, node_shape shape, std::size_t bytes);

// The chunks a call of `bytes` is cut into: `forced` when it is 1..kMaxHierarchicalChunks, the plan's when it is 0,
// never more than `share_count` (every chunk gives each PE at least one element). Throws
// shoal::error(errc::config) naming SHOAL_HIERARCHICAL_CHUNKS for a value out of range.
int hierarchical_chunks(const coll_model_table& table, node_shape shape, std::size_t bytes, std::size_t share_count,
                        std::int64_t forced);
// The same for a call on `t` (the world team) with the active model (tuning.hpp's active_coll_model) and the
// SHOAL_HIERARCHICAL_CHUNKS that init read: never the environment of the moment, which a PE may have changed on
// its own, and which the other PEs would not follow into a different sequence of calls.
int hierarchical_chunks(const team& t, node_shape shape, std::size_t bytes, std::size_t share_count);

// Whether reduce_on_stream(t, dst, src, count, ...) runs hierarchically: t is the world team, its PEs span
// nodes with m >= 2 consecutively numbered PEs on each, the call uses all of the team's channels, dst and
// src do not overlap, count >= m; and SHOAL_ALGO_REDUCE says hierarchical, or it is unset (or auto) and the
// model predicts hierarchical faster. Any other forced algorithm runs flat. When any PE has fewer hardware work
// queues than kHierarchicalWorkQueues (host/work_queues.hpp; the fewest is agreed at init, so every PE decides
// alike) the model's choice is flat, and a forced hierarchical throws shoal::error(unsupported) naming that PE and
// the variable to set: it would wait for the proxy forever. `view` is the call's view of t (stream_view: the
// channels the call asked for), which the caller has built already.
bool runs_hierarchically(const team& t, const team_handle& view, const void* dst, const void* src, std::size_t count,
                         std::size_t element_bytes);

// The node and network streams of one pipelined call: to_network() makes the world's network stream wait
// for what the caller's stream holds so far, from_network() the reverse. A call starts with to_network()
// before its first network phase and ends with from_network() after its last, so the caller's stream (and
// a CUDA graph captured from it) holds all of it. Holds the world's network mutex: one pipelined call at a
// time per world.
class network_pipeline {
 public:
  network_pipeline(const team& t, cudaStream_t node_stream);
  cudaStream_t network_stream() const noexcept { return network_; }
  void to_network();
  void from_network();

 private:
  std::unique_lock<std::mutex> lock_;
  cudaStream_t node_, network_;
  cudaEvent_t node_done_, network_done_;
};

}  // namespace shoal::detail
