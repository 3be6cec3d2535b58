#include "shoal/error.hpp"

namespace shoal {

std::string_view to_string(errc category) noexcept {
  switch (category) {
    case errc::invalid_argument:
      return "invalid argument";
    case errc::config:
      return "configuration";
    case errc::bootstrap:
      return "bootstrap";
    case errc::peer_failure:
      return "peer failure";
    case errc::timeout:
      return "timeout";
    case errc::cuda:
      return "CUDA";
    case errc::system:
      return "system";
    case errc::out_of_memory:
      return "out of memory";
    case errc::unsupported:
      return "unsupported";
    case errc::internal:
      return "internal";
  }
  return "unknown";
}

namespace {
std::string compose(errc category, std::string_view context, std::string_view detail) {
  std::string what = "shoal ";
  what += to_string(category);
  what += " error in ";
  what += context;
  what += ": ";
  what += detail;
  return what;
}
}  // namespace

error::error(errc category, std::string_view context, std::string_view detail)
    : std::runtime_error(compose(category, context, detail)), category_(category), context_(context), detail_(detail) {}

}  // namespace shoal
