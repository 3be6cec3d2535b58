// Team barriers inside a kernel.
//   barrier(scope, t)  quiet, then every member meets: on return all RMA any member issued before its
//                      barrier is complete and visible.
//   sync(scope, t)     the meeting alone.
// At thread, warp and block scope the scope meets on the handle's first channel. At grid scope all CTAs
// meet (grid_sync: every CTA must be resident), CTA 0 meets the other members, and the CTAs meet again.
// grid_sync uses words of the PE, not of the team: one grid-scope barrier or sync at a time per PE, even
// on disjoint channels.
#pragma once

#include "shoal/dev/barrier.cuh"
#include "shoal/dev/coll/detail/unit.cuh"

namespace shoal {

namespace detail {
// One system fence for all the caller's threads: the leader's release in arrive(), after the unit met
// (at grid scope: after the grid met in grid_sync, then CTA 0's leader), is cumulative over every thread's
// earlier writes, as barrier_all's is. A quiet in every thread before it would be a second fence: 2 us
// more per barrier kernel on a stream (perf notes 36). Requests through the proxy are the PE's, so the
// leader's wait for them covers every thread's. The barrier on a stream opens its kernel with the meeting
// and orders with earlier_writes::release_each instead (perf notes 70), except across nodes.
template <typename Scope>
__device__ inline void team_meet(Scope scope, const team_handle& t, earlier_writes ordering) {
  check_team_view(t);
  const bool ordered = ordering != earlier_writes::unordered;
  with_unit_steps(scope, t, [&](auto unit) {
    using Unit = decltype(unit);
    auto meet = [&] {
      const int channel = t.channel_first;
      const std::uint64_t value = 2 * next_step(unit, t, channel, true).epoch;
      if constexpr (Unit::proxied) {
        if (ordered && Unit::leader()) proxy_quiet(t.world);
        arrive(unit, t, channel, value, ordered, all_members);
      } else {
        // The barrier completes all RMA this PE issued, to PEs outside the team too: those on other nodes went
        // through the proxy even when every member is reachable by load and store.
        if (ordered && Unit::leader() && t.world.proxy != nullptr) proxy_quiet(t.world);
        if (ordering == earlier_writes::release_each)
          arrive_each_released(unit, t, channel, value, all_members);
        else
          arrive(unit, t, channel, value, ordered, all_members);
      }
      wait_members(unit, t, channel, value, all_members);
    };
    if constexpr (is_grid_v<Scope>) {
      grid_sync(t.world);
      if (grid_scope::block_rank() == 0) meet();
      grid_sync(t.world);
    } else {
      meet();
    }
  });
}
}  // namespace detail

template <typename Scope>
__device__ inline void barrier(Scope scope, const team_handle& t) {
  detail::team_meet(scope, t, detail::earlier_writes::quiet_first);
}

template <typename Scope>
__device__ inline void sync(Scope scope, const team_handle& t) {
  detail::team_meet(scope, t, detail::earlier_writes::unordered);
}

}  // namespace shoal
