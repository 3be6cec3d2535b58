#include "bootstrap/pe_vote.hpp"

#include <fmt/format.h>

#include "shoal/error.hpp"

namespace shoal::detail {

std::int8_t vote_of(const std::exception_ptr& mine) {
  if (!mine) return kSucceeded;
  try {
    std::rethrow_exception(mine);
  } catch (const error& e) {
    return static_cast<std::int8_t>(e.category());
  } catch (...) {
    return static_cast<std::int8_t>(errc::internal);
  }
}

void throw_if_any_vote_failed(std::span<const std::int8_t> votes, const std::exception_ptr& mine,
                              std::string_view call, std::string_view what) {
  if (mine) std::rethrow_exception(mine);
  for (std::size_t pe = 0; pe < votes.size(); ++pe)
    if (votes[pe] != kSucceeded)
      throw error(static_cast<errc>(votes[pe]), call,
                  fmt::format("PE {} could not {} (its own error says why); the call failed on every PE", pe, what));
}

void throw_if_any_pe_failed(shoal::bootstrap& boot, const std::exception_ptr& mine, std::string_view call,
                            std::string_view what) {
  const std::int8_t vote = vote_of(mine);
  std::vector<std::int8_t> votes(static_cast<std::size_t>(boot.n_pes()));
  boot.all_gather(&vote, votes.data(), 1);
  throw_if_any_vote_failed(votes, mine, call, what);
}

}  // namespace shoal::detail
