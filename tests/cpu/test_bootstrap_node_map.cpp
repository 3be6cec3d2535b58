// Grouping PEs into nodes from their host identities, with and without SHOAL_EMULATE_NODES.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bootstrap/node_map.hpp"

namespace shoal::detail {
namespace {

using pes = std::vector<int>;

TEST(BootstrapNodeMap, OneHostIsOneNode) {
  std::vector<std::string> hosts(4, "a");
  node_map m = group_nodes(hosts, 1);
  EXPECT_EQ(m.pes_of_node, (std::vector<pes>{{0, 1, 2, 3}}));
  EXPECT_EQ(m.node_of_pe, (pes{0, 0, 0, 0}));
}

TEST(BootstrapNodeMap, HostsInterleavedAreNumberedBySmallestPe) {
  std::vector<std::string> hosts = {"z", "a", "z", "a", "m"};
  node_map m = group_nodes(hosts, 1);
  EXPECT_EQ(m.pes_of_node, (std::vector<pes>{{0, 2}, {1, 3}, {4}}));
  EXPECT_EQ(m.node_of_pe, (pes{0, 1, 0, 1, 2}));
}

TEST(BootstrapNodeMap, EmulationSplitsEachHostContiguously) {
  std::vector<std::string> hosts(8, "a");
  EXPECT_EQ(group_nodes(hosts, 2).pes_of_node, (std::vector<pes>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(group_nodes(hosts, 3).pes_of_node, (std::vector<pes>{{0, 1, 2}, {3, 4, 5}, {6, 7}}));
  // More emulated nodes than PEs: one PE per node.
  EXPECT_EQ(group_nodes(hosts, 100).pes_of_node.size(), 8u);
}

TEST(BootstrapNodeMap, EmulationPerHostWithUnevenHosts) {
  std::vector<std::string> hosts = {"a", "b", "a", "b", "a", "a"};  // a: 0 2 4 5, b: 1 3
  node_map m = group_nodes(hosts, 2);
  EXPECT_EQ(m.pes_of_node, (std::vector<pes>{{0, 2}, {1}, {3}, {4, 5}}));
  EXPECT_EQ(m.node_of_pe, (pes{0, 1, 0, 2, 3, 3}));
  hosts = {"a", "a", "a"};
  EXPECT_EQ(group_nodes(hosts, 0).pes_of_node.size(), 1u);  // below 1 is treated as 1
}

TEST(BootstrapNodeMap, EveryPeInExactlyOneNode) {
  std::vector<std::string> hosts;
  for (int pe = 0; pe < 97; ++pe) hosts.push_back(fmt::format("h{}", pe * 7 % 5));
  for (int k : {1, 2, 3, 7, 50}) {
    node_map m = group_nodes(hosts, k);
    std::vector<int> seen(hosts.size(), 0);
    for (std::size_t node = 0; node < m.pes_of_node.size(); ++node)
      for (int pe : m.pes_of_node[node]) {
        ++seen[static_cast<std::size_t>(pe)];
        EXPECT_EQ(m.node_of_pe[static_cast<std::size_t>(pe)], static_cast<int>(node));
      }
    for (int s : seen) EXPECT_EQ(s, 1);
  }
}

// same_local_rank_team takes one PE per node only when nodes_uniform holds, and every PE must agree on it.
TEST(BootstrapNodeMap, NodesUniformNeedsEqualContiguousNodes) {
  EXPECT_TRUE(nodes_uniform(pes{0, 0, 1, 1}));
  EXPECT_TRUE(nodes_uniform(pes{5, 5, 2, 2, 9, 9}));  // any numbering of the nodes
  EXPECT_TRUE(nodes_uniform(pes{0, 1, 2}));           // one PE per node
  EXPECT_TRUE(nodes_uniform(pes{0, 0, 0}));           // one node
  EXPECT_FALSE(nodes_uniform(pes{}));
  EXPECT_FALSE(nodes_uniform(pes{0, 0, 0, 1}));        // 3 + 1: the lone PE's node looks regular on its own
  EXPECT_FALSE(nodes_uniform(pes{0, 0, 1, 1, 2, 3}));  // 2 + 2 + 1 + 1
  EXPECT_FALSE(nodes_uniform(pes{0, 1, 0, 1}));        // interleaved
  EXPECT_FALSE(nodes_uniform(pes{0, 0, 1, 1, 0, 0}));  // a node in two blocks
  EXPECT_FALSE(nodes_uniform(pes{0, 0, 1, 1, 1, 1}));  // 2 + 4
}

// The layouts that group_nodes makes with SHOAL_EMULATE_NODES: uneven splits are not uniform.
TEST(BootstrapNodeMap, EmulatedSplitsAreUniformOnlyWhenEven) {
  for (int n_pes = 1; n_pes <= 9; ++n_pes)
    for (int k = 1; k <= n_pes; ++k) {
      std::vector<std::string> hosts(static_cast<std::size_t>(n_pes), "a");
      EXPECT_EQ(nodes_uniform(group_nodes(hosts, k).node_of_pe), n_pes % k == 0) << n_pes << " PEs, " << k << " nodes";
    }
}

}  // namespace
}  // namespace shoal::detail
