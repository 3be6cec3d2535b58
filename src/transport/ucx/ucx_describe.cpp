// The entry points that transport/network.hpp declares, in a build with UCX.
#include <fmt/format.h>

#include <cstdlib>

#include "transport/ucx/ucx_network.hpp"

// --- the entry points that network.hpp declares

namespace shoal::detail {

bool ucx_network_available() noexcept { return true; }

// Starts a UCP context (no worker, no peer) to see what this UCX can do, then drops it.
std::string describe_ucx_network() {
  const char* version = ucp_get_version_string();
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK)
    return fmt::format("UCX {}: cannot read the UCX_* settings ({})", version, ucs_status_string(s));
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_AM;
  ucp_context_h context = nullptr;
  ucs_status_t s = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (s != UCS_OK) return fmt::format("UCX {}: unusable here ({})", version, ucs_status_string(s));
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  const bool cuda =
      ucp_context_query(context, &attr) == UCS_OK && (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  ucp_cleanup(context);
  const char* tls = std::getenv("UCX_TLS");
  return fmt::format("UCX {}: host memory, network atomics, active messages; {}; transports UCX_TLS={}", version,
                     cuda ? "GPU memory too" : "no GPU memory (this UCX has no CUDA support)",
                     tls && *tls ? tls : "all");
}

std::unique_ptr<network> make_ucx_network(bootstrap& boot) { return std::make_unique<ucx::ucx_network>(boot); }

}  // namespace shoal::detail
