// A yes/no vote of every PE, for collective calls that must succeed on every PE or fail on every PE.
#pragma once

#include <cstdint>
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

}  // namespace shoal::detail
