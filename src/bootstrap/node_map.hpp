// Grouping of PEs into nodes: pure, from every PE's host identity, so every PE computes the same answer.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shoal::detail {

struct node_map {
  std::vector<int> node_of_pe;                // indexed by pe
  std::vector<std::vector<int>> pes_of_node;  // each ascending; nodes numbered by their smallest pe
};

// PEs with equal host identity share a host. Each host's PEs (ascending) are cut into
// min(emulate_nodes, L) contiguous groups of sizes differing by at most one (the larger first), L being
// the host's PE count. So emulate_nodes = 1 gives one node per host, and a large value one node per PE.
node_map group_nodes(std::span<const std::string> host_of_pe, int emulate_nodes);

// Where PE `pe` sits, as a bootstrap reports it: its node, that node's PEs (ascending) and its index
// among them, and its index among the PEs of its host (which picks its GPU).
struct node_placement {
  int node = 0;
  int n_nodes = 1;
  int local_pe = 0;
  int host_pe = 0;
  std::vector<int> node_pes;
};
node_placement place_pe(std::span<const std::string> host_of_pe, int emulate_nodes, int pe);

// True when every node holds the same number of PEs and each node's PEs are consecutive world PEs, judged
// from the node of every PE (node_of[pe], any numbering of the nodes). Every PE passes the same node_of
// and gets the same answer, which is what a team of one PE per node needs (same_local_rank_team): a PE
// judging from its own node alone can see a regular node in an irregular job.
bool nodes_uniform(std::span<const int> node_of);

// The world PE of node-local index `local_peer` of placement `p`; throws shoal::error(invalid_argument)
// naming `call` when it is not an index of that node.
int world_pe_of_local(const node_placement& p, int local_peer, std::string_view call);

}  // namespace shoal::detail
