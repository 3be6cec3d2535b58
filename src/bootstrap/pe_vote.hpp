// Votes of every PE, for collective calls that must succeed on every PE or fail on every PE.
#pragma once

#include <cstdint>
#include <exception>
#include <string_view>
#include <utility>
#include <vector>

#include "shoal/bootstrap.hpp"

namespace shoal::detail {

// Collective over every PE of `boot`: returns the lowest PE that voted no, or -1 when every PE voted yes.
// Every PE gets the same answer.
inline int first_pe_voting_no(shoal::bootstrap& boot, bool yes) {
  const std::uint8_t mine = yes ? 1 : 0;
  std::vector<std::uint8_t> all(static_cast<std::size_t>(boot.n_pes()));
  boot.all_gather(&mine, all.data(), 1);
  for (int pe = 0; pe < boot.n_pes(); ++pe)
    if (all[static_cast<std::size_t>(pe)] == 0) return pe;
  return -1;
}

// Collective over every PE of `boot`: each PE says whether its share of the collective call `call` failed
// (`mine`: its exception, or null). Returns on every PE when none failed. Otherwise it throws on every PE: a
// PE that failed rethrows its own exception; the others throw a shoal::error of `call`, in the category of
// the first failed PE's error (`internal` if that was no shoal::error), saying that PE could not `what`.
// Every PE gets past it, so none waits in the next collective, until the bootstrap's timeout, for a PE that
// threw alone; and no PE is left to match a later collective of the failed one (a world's teardown).
void throw_if_any_pe_failed(shoal::bootstrap& boot, const std::exception_ptr& mine, std::string_view call,
                            std::string_view what);

// Runs `step`, this PE's share of the collective call `call`, then throw_if_any_pe_failed. Returning means
// every PE's step succeeded; the vote also orders every PE's step before any PE's return, as a barrier does.
template <class Step>
void run_on_every_pe(shoal::bootstrap& boot, std::string_view call, std::string_view what, Step&& step) {
  std::exception_ptr mine;
  try {
    std::forward<Step>(step)();
  } catch (...) {
    mine = std::current_exception();
  }
  throw_if_any_pe_failed(boot, mine, call, what);
}

}  // namespace shoal::detail
