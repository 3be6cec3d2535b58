// shoal::error: the one exception type of shoal's host API.
// Every failing host call throws it with a category (what kind of failure) and a context (which call,
// which value), so callers can branch on the category and print what() for people.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace shoal {

enum class errc {
  invalid_argument,  // a caller passed a value the call does not accept (names the value)
  config,            // a SHOAL_* variable holds a value the configuration table rejects
  bootstrap,         // PEs could not find or agree with each other (wrong secret, size mismatch, ...)
  peer_failure,      // another PE died or stopped answering
  timeout,           // a bounded wait ran out
  cuda,              // a CUDA runtime or driver call failed
  system,            // an OS call failed (errno is in the message)
  out_of_memory,     // the symmetric heap or the GPU ran out
  unsupported,       // the machine or build lacks what the call needs
  internal,          // a broken invariant inside shoal: a bug to report
};

std::string_view to_string(errc category) noexcept;

class error : public std::runtime_error {
 public:
  // `context` names the failing call; `detail` says what was wrong with which value.
  error(errc category, std::string_view context, std::string_view detail);

  errc category() const noexcept { return category_; }
  const std::string& context() const noexcept { return context_; }
  const std::string& detail() const noexcept { return detail_; }

 private:
  errc category_;
  std::string context_;
  std::string detail_;
};

}  // namespace shoal
