#include "shoal/version.hpp"

// The build passes these on the compiler command line. Every target that compiles base/ should define
// SHOAL_VERSION_STRING; a target that does not still builds, and says "unknown" rather than a guess.
#ifndef SHOAL_VERSION_STRING
#define SHOAL_VERSION_STRING "unknown"
#endif
#ifndef SHOAL_GIT_COMMIT
#define SHOAL_GIT_COMMIT ""
#endif

namespace shoal {

std::string_view version() noexcept { return SHOAL_VERSION_STRING; }

std::string_view git_commit() noexcept { return SHOAL_GIT_COMMIT; }

}  // namespace shoal
