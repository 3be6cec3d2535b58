// Hierarchical all-reduce on a stream, for the world team across nodes: reduce-scatter within each node
// (NVLink), all-reduce of each PE's share among the PEs of its local rank on every node (the proxy), then
// all-gather within the node. The network carries 1/m of the data that a flat all-reduce sends it (m PEs
// per node). The three phases run one after the other on the caller's stream: no pipelining of one
// chunk's network phase under another's NVLink phases yet. Host only.
#pragma once

#include <cstddef>

#include "shoal/coll_model.hpp"
#include "shoal/coll_stream.hpp"
#include "shoal/team.hpp"

namespace shoal::detail {

// What hierarchical_reduce_us adds up, and what the choice compares it with: the predicted on-stream time
// of the flat one-shot all-reduce over `shape`, and of the hierarchical one as shoal runs it (three
// launches, phases in turn, the middle one a flat one-shot among `shape.nodes` PEs).
double flat_reduce_us(const coll_model_table& table, node_shape shape, std::size_t bytes);
double hierarchical_reduce_us(const coll_model_table& table, node_shape shape, std::size_t bytes);

// Whether reduce_on_stream(t, dst, src, count, ...) runs hierarchically: t is the world team, its PEs span
// nodes with m >= 2 consecutively numbered PEs on each, the call uses all of the team's channels, dst and
// src do not overlap, count >= m; and SHOAL_ALGO_REDUCE says hierarchical, or it is unset (or auto) and the
// model predicts hierarchical faster. Any other forced algorithm runs flat.
bool runs_hierarchically(const team& t, channel_range channels, const void* dst, const void* src, std::size_t count,
                         std::size_t element_bytes);

}  // namespace shoal::detail
