// The node half of shoal::bootstrap, answered from a node_placement: shared by the bootstraps that group
// PEs by host identity (the TCP bootstrap and the MPI one), which fill `placement_` at construction.
#pragma once

#include <span>
#include <string_view>

#include "bootstrap/node_map.hpp"
#include "shoal/bootstrap.hpp"

namespace shoal::detail {

class placed_bootstrap : public shoal::bootstrap {
 public:
  int node() const noexcept override { return placement_.node; }
  int n_nodes() const noexcept override { return placement_.n_nodes; }
  int local_pe() const noexcept override { return placement_.local_pe; }
  int host_pe() const noexcept override { return placement_.host_pe; }
  int local_size() const noexcept override { return static_cast<int>(placement_.node_pes.size()); }
  std::span<const int> node_pes() const noexcept override { return placement_.node_pes; }

 protected:
  // The world PE of a node-local peer, for send_fds/recv_fds; throws naming `call` when out of range.
  int world_pe_of(int local_peer, std::string_view call) const {
    return world_pe_of_local(placement_, local_peer, call);
  }

  node_placement placement_;
};

}  // namespace shoal::detail
