// Temporary until the TCP bootstrap lands: lets the tree build.
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"

namespace shoal {
unique_id make_unique_id() { throw error(errc::unsupported, "make_unique_id", "not implemented yet"); }
std::unique_ptr<bootstrap> make_bootstrap_from_env() { throw error(errc::unsupported, "make_bootstrap_from_env", "not implemented yet"); }
std::unique_ptr<bootstrap> make_bootstrap(const unique_id&, int, int) { throw error(errc::unsupported, "make_bootstrap", "not implemented yet"); }
}  // namespace shoal
