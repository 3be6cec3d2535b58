#include <gtest/gtest.h>

#include "shoal/error.hpp"
#include "transport/topology.hpp"

namespace shoal::detail {
namespace {

// A made-up host: GPUs 0 and 1 map each other over NVLink; GPU 2 maps nobody.
topology three_gpus() {
  topology t;
  for (int d = 0; d < 3; ++d) t.gpus.push_back(gpu_info{.device = d, .name = "test GPU"});
  for (int from = 0; from < 3; ++from)
    for (int to = 0; to < 3; ++to) {
      bool linked = from == to || (from < 2 && to < 2);
      t.links.push_back(gpu_link{.from = from, .to = to, .peer_access = linked, .nvlinks = linked ? 4 : 0});
    }
  return t;
}

// On a machine without a driver or GPU (CI) this must be an answer, not an exception; on a GPU machine
// the answer must be complete and consistent.
TEST(Topology, DiscoveryAlwaysAnswers) {
  topology t;
  ASSERT_NO_THROW(t = discover_topology());
  if (t.gpus.empty()) {
    EXPECT_FALSE(t.no_gpu_reason.empty()) << "zero GPUs must come with a reason";
    EXPECT_TRUE(t.links.empty());
    GTEST_SKIP() << "no GPU: " << t.no_gpu_reason << " (checked the no-GPU path only)";
  }
  EXPECT_TRUE(t.no_gpu_reason.empty());
  ASSERT_EQ(t.links.size(), t.gpus.size() * t.gpus.size());
  for (const gpu_info& g : t.gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_FALSE(g.pci_bus_id.empty());
    EXPECT_GT(g.sm_count, 0);
    EXPECT_GT(g.memory_bytes, 0u);
    EXPECT_GT(g.cc_major, 0);
  }
  for (int i = 0; i < static_cast<int>(t.gpus.size()); ++i) {
    EXPECT_EQ(t.link(i, i).kind(), link_kind::self);
    for (int j = 0; j < static_cast<int>(t.gpus.size()); ++j) {
      EXPECT_EQ(t.link(i, j).from, i);
      EXPECT_EQ(t.link(i, j).to, j);
    }
  }
}

TEST(Topology, DiscoveryCanRepeat) {
  topology a = discover_topology();
  topology b = discover_topology();
  EXPECT_EQ(a.gpus.size(), b.gpus.size());
  EXPECT_EQ(a.no_gpu_reason, b.no_gpu_reason);
}

TEST(Topology, LinkKindsAndLabels) {
  gpu_link link{.from = 0, .to = 1, .peer_access = true, .nvlinks = 18};
  EXPECT_EQ(link.kind(), link_kind::nvlink);
  EXPECT_EQ(link_label(link), "NV18");
  link.nvlinks = 0;
  EXPECT_EQ(link.kind(), link_kind::pcie);
  EXPECT_EQ(link_label(link), "PCIe-P2P");
  link.nvlinks = -1;  // NVML absent: peer access, type unknown
  EXPECT_EQ(link.kind(), link_kind::p2p);
  EXPECT_EQ(link_label(link), "P2P");
  link.peer_access = false;
  link.nvlinks = 2;  // an NVLink without peer access is still not load/store reachable
  EXPECT_EQ(link.kind(), link_kind::none);
  EXPECT_EQ(link_label(link), "none");
  EXPECT_EQ(link_label(gpu_link{.from = 3, .to = 3, .peer_access = true}), "X");
}

TEST(Topology, LinkRejectsUnknownDevices) {
  topology t = three_gpus();
  const gpu_link& known = t.link(2, 0);
  EXPECT_EQ(known.from, 2);
  EXPECT_EQ(known.to, 0);
  EXPECT_EQ(known.kind(), link_kind::none);
  try {
    t.link(0, 3);
    FAIL() << "device 3 of a 3-GPU host was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.category(), errc::invalid_argument);
  }
  EXPECT_THROW(t.link(-1, 0), error);
}

TEST(Transport, RuleNeedsSameNodeAndPeerAccess) {
  EXPECT_EQ(select_transport(true, true), transport_kind::p2p);
  EXPECT_EQ(select_transport(true, false), transport_kind::proxy);
  EXPECT_EQ(select_transport(false, true), transport_kind::proxy);
  EXPECT_EQ(select_transport(false, false), transport_kind::proxy);
}

TEST(Transport, PairsOfPes) {
  topology t = three_gpus();
  EXPECT_EQ(select_transport({"a", 0}, {"a", 1}, t), transport_kind::p2p);
  EXPECT_EQ(select_transport({"a", 1}, {"a", 0}, t), transport_kind::p2p);
  EXPECT_EQ(select_transport({"a", 0}, {"a", 2}, t), transport_kind::proxy);  // no peer access
  EXPECT_EQ(select_transport({"a", 2}, {"a", 2}, t), transport_kind::p2p);    // two PEs sharing a GPU
  EXPECT_EQ(select_transport({"a", 0}, {"b", 1}, t), transport_kind::proxy);  // other node
  // An emulated node (SHOAL_EMULATE_NODES) is a different node even on the same host and GPUs.
  EXPECT_EQ(select_transport({"host/0", 0}, {"host/1", 1}, t), transport_kind::proxy);
  // Another node's devices need not exist here.
  EXPECT_EQ(select_transport({"a", 0}, {"b", 7}, t), transport_kind::proxy);
  EXPECT_THROW(select_transport({"a", 0}, {"a", 7}, t), error);
}

// Peer access one way only (GPU 0 reaches GPU 2's memory, not the reverse): link(from, to) is in the row of
// `from`, and select_transport(a, b) asks whether a's GPU reaches b's, so each direction is answered alone.
TEST(Transport, OneWayPeerAccessIsReadByDirection) {
  topology t = three_gpus();
  t.links[0 * 3 + 2].peer_access = true;  // row-major by `from`
  EXPECT_TRUE(t.link(0, 2).peer_access);
  EXPECT_FALSE(t.link(2, 0).peer_access);
  EXPECT_EQ(select_transport({"a", 0}, {"a", 2}, t), transport_kind::p2p);
  EXPECT_EQ(select_transport({"a", 2}, {"a", 0}, t), transport_kind::proxy);
}

TEST(Transport, NamesAndDescriptions) {
  EXPECT_EQ(to_string(transport_kind::p2p), "p2p");
  EXPECT_EQ(to_string(transport_kind::proxy), "proxy");
  EXPECT_NE(describe(transport_kind::p2p).find("peer mapping"), std::string_view::npos);
  EXPECT_NE(describe(transport_kind::proxy).find("UCX"), std::string_view::npos);
}

}  // namespace
}  // namespace shoal::detail
