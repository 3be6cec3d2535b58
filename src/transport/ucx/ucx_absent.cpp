// The network entry points of a build without UCX (CMake did not find libucx-dev): the proxy has no
// network engine, and says so.
#include <string>

#include "shoal/error.hpp"
#include "transport/network.hpp"

namespace shoal::detail {

bool ucx_network_available() noexcept { return false; }

std::string describe_ucx_network() { return "none: shoal was built without UCX (install libucx-dev and reconfigure)"; }

std::unique_ptr<network> make_ucx_network(bootstrap& /*boot*/) {
  throw error(errc::unsupported, "make_ucx_network",
              "shoal was built without UCX, so the proxy has no network (install libucx-dev and reconfigure)");
}

}  // namespace shoal::detail
