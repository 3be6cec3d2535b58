#include "shoal/version.hpp"

// The build passes the version on the compiler command line and writes the commit into a generated
// header at every build. A target without them still builds, and says "unknown" or "" rather than guess.
#if __has_include("shoal_git_commit.hpp")
#include "shoal_git_commit.hpp"
#endif
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
