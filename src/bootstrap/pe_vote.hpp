// Votes of every PE, for collective calls that must succeed on every PE or fail on every PE.
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string_view>
#include <type_traits>
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

// A PE's vote on its share of a collective call: kSucceeded, or the category of its error.
constexpr std::int8_t kSucceeded = -1;
std::int8_t vote_of(const std::exception_ptr& mine);

// Judges the votes of every PE (in PE order) on their share of the collective call `call`; `mine` is this
// PE's failure, or null. Returns when none failed. Otherwise it throws: a PE that failed rethrows its own
// exception; the others throw a shoal::error of `call`, in the category of the first failed PE's error
// (`internal` if that was no shoal::error), saying that PE could not `what`.
void throw_if_any_vote_failed(std::span<const std::int8_t> votes, const std::exception_ptr& mine,
                              std::string_view call, std::string_view what);

// Collective over every PE of `boot`: each PE says whether its share of the collective call `call` failed
// (`mine`: its exception, or null), and throw_if_any_vote_failed judges. Every PE gets past it, so none waits
// in the next collective, until the bootstrap's timeout, for a PE that threw alone; and no PE is left to match
// a later collective of the failed one (a world's teardown).
void throw_if_any_pe_failed(shoal::bootstrap& boot, const std::exception_ptr& mine, std::string_view call,
                            std::string_view what);

// Runs `step`; returns the exception it threw, or null.
template <class Step>
std::exception_ptr failure_of(Step&& step) {
  try {
    std::forward<Step>(step)();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// Runs `step`, this PE's share of the collective call `call`, then throw_if_any_pe_failed. Returning means
// every PE's step succeeded; the vote also orders every PE's step before any PE's return, as a barrier does.
template <class Step>
void run_on_every_pe(shoal::bootstrap& boot, std::string_view call, std::string_view what, Step&& step) {
  throw_if_any_pe_failed(boot, failure_of(std::forward<Step>(step)), call, what);
}

// throw_if_any_pe_failed and an all-gather in one bootstrap round trip: returns every PE's `payload` (in PE
// order) when no PE failed. For a call whose PEs must both agree on its arguments and have finished a step
// of their own first, such as free's wait for the device.
template <class T>
  requires std::is_trivially_copyable_v<T>
std::vector<T> all_gather_unless_any_pe_failed(shoal::bootstrap& boot, const T& payload,
                                               const std::exception_ptr& mine, std::string_view call,
                                               std::string_view what) {
  constexpr std::size_t kBallot = sizeof(T) + 1;  // the payload, then the vote
  const auto n = static_cast<std::size_t>(boot.n_pes());
  std::vector<std::byte> ballots(n * kBallot);
  std::byte own[kBallot];
  std::memcpy(own, &payload, sizeof(T));
  own[sizeof(T)] = static_cast<std::byte>(vote_of(mine));
  boot.all_gather(own, ballots.data(), kBallot);
  std::vector<std::int8_t> votes(n);
  std::vector<T> payloads(n);
  for (std::size_t pe = 0; pe < n; ++pe) {
    votes[pe] = static_cast<std::int8_t>(ballots[pe * kBallot + sizeof(T)]);
    std::memcpy(&payloads[pe], &ballots[pe * kBallot], sizeof(T));
  }
  throw_if_any_vote_failed(votes, mine, call, what);
  return payloads;
}

}  // namespace shoal::detail
