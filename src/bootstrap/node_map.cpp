#include "bootstrap/node_map.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "shoal/error.hpp"

namespace shoal::detail {

node_map group_nodes(std::span<const std::string> host_of_pe, int emulate_nodes) {
  std::map<std::string_view, std::vector<int>> pes_of_host;  // pes pushed in ascending order
  for (int pe = 0; pe < static_cast<int>(host_of_pe.size()); ++pe) pes_of_host[host_of_pe[pe]].push_back(pe);

  std::vector<std::vector<int>> groups;
  for (auto& [host, pes] : pes_of_host) {
    int count = static_cast<int>(pes.size());
    int n_groups = std::clamp(emulate_nodes, 1, count);
    int base = count / n_groups, extra = count % n_groups;
    auto it = pes.begin();
    for (int g = 0; g < n_groups; ++g) {
      int size = base + (g < extra ? 1 : 0);
      groups.emplace_back(it, it + size);
      it += size;
    }
  }
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });

  node_map map;
  map.node_of_pe.assign(host_of_pe.size(), -1);
  for (int node = 0; node < static_cast<int>(groups.size()); ++node)
    for (int pe : groups[node]) map.node_of_pe[pe] = node;
  map.pes_of_node = std::move(groups);
  return map;
}

node_placement place_pe(std::span<const std::string> host_of_pe, int emulate_nodes, int pe) {
  node_map map = group_nodes(host_of_pe, emulate_nodes);
  node_placement p;
  p.node = map.node_of_pe[static_cast<std::size_t>(pe)];
  p.n_nodes = static_cast<int>(map.pes_of_node.size());
  p.node_pes = std::move(map.pes_of_node[static_cast<std::size_t>(p.node)]);
  p.local_pe = static_cast<int>(std::find(p.node_pes.begin(), p.node_pes.end(), pe) - p.node_pes.begin());
  p.host_pe = static_cast<int>(
      std::count(host_of_pe.begin(), host_of_pe.begin() + pe, host_of_pe[static_cast<std::size_t>(pe)]));
  return p;
}

bool nodes_uniform(std::span<const int> node_of) {
  const std::size_t n = node_of.size();
  if (n == 0) return false;
  std::size_t local_size = 1;
  while (local_size < n && node_of[local_size] == node_of[0]) ++local_size;
  if (n % local_size != 0) return false;
  // Blocks of local_size consecutive PEs, each on one node, and no node in two blocks.
  std::vector<int> block_nodes;
  for (std::size_t first = 0; first < n; first += local_size) {
    for (std::size_t pe = first; pe < first + local_size; ++pe)
      if (node_of[pe] != node_of[first]) return false;
    block_nodes.push_back(node_of[first]);
  }
  std::sort(block_nodes.begin(), block_nodes.end());
  return std::adjacent_find(block_nodes.begin(), block_nodes.end()) == block_nodes.end();
}

int world_pe_of_local(const node_placement& p, int local_peer, std::string_view call) {
  if (local_peer < 0 || local_peer >= static_cast<int>(p.node_pes.size()))
    throw error(errc::invalid_argument, call,
                fmt::format("local_peer {} is not a PE of this node (node {} has {} PEs)", local_peer, p.node,
                            p.node_pes.size()));
  return p.node_pes[static_cast<std::size_t>(local_peer)];
}

}  // namespace shoal::detail
