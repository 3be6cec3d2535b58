#include "bootstrap/pe_vote.hpp"

#include <fmt/format.h>

#include "shoal/error.hpp"

namespace shoal::detail {

namespace {

// What a PE contributes to the vote: kSucceeded, or the category of its error.
constexpr std::int8_t kSucceeded = -1;

std::int8_t outcome_of(const std::exception_ptr& failure) {
  if (!failure) return kSucceeded;
  try {
    std::rethrow_exception(failure);
  } catch (const error& e) {
    return static_cast<std::int8_t>(e.category());
  } catch (...) {
    return static_cast<std::int8_t>(errc::internal);
  }
}

}  // namespace

void throw_if_any_pe_failed(shoal::bootstrap& boot, const std::exception_ptr& mine, std::string_view call,
                            std::string_view what) {
  const std::int8_t outcome = outcome_of(mine);
  std::vector<std::int8_t> all(static_cast<std::size_t>(boot.n_pes()));
  boot.all_gather(&outcome, all.data(), 1);
  if (mine) std::rethrow_exception(mine);
  for (int pe = 0; pe < boot.n_pes(); ++pe) {
    const std::int8_t theirs = all[static_cast<std::size_t>(pe)];
    if (theirs != kSucceeded)
      throw error(static_cast<errc>(theirs), call,
                  fmt::format("PE {} could not {} (its own error says why); the call failed on every PE", pe, what));
  }
}

}  // namespace shoal::detail
