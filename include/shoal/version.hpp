// shoal::version(): which shoal library this process actually loaded.
// Use it in logs and bug reports; it answers for the shared library at run time, which can differ from
// the headers a program was compiled against.
#pragma once

#include <string_view>

namespace shoal {

// The release, "major.minor.patch" (e.g. "0.1.0"); "unknown" in a build that did not record it.
std::string_view version() noexcept;

// The source revision the library was built from (a git commit, possibly "-dirty"), or "" when the build
// did not record one.
std::string_view git_commit() noexcept;

}  // namespace shoal
