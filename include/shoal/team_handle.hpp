// shoal::team_handle: a team as kernels see it, passed by value like device_handle. It carries the
// world's handle, the team's PE set, this PE's index in it, the team's synchronization state and
// scratch in the symmetric heap, and the algorithm choice the cost model made when the team was created.
//
// Channels. A team's state is split into channels; each channel has its own epochs, flags and LL
// buffers, so collectives on different channels may run at the same time. A call at thread, warp or
// block scope uses the first channel of the handle; a grid-scope call uses one channel per CTA (CTAs
// beyond the channel count take no share). Collectives that run concurrently on one team (from
// different CTAs, kernels or streams) must use disjoint channel ranges: t.channels(first, count).
// (Grid-scope barrier and sync also use the PE's grid_sync words: one of them at a time per PE.)
// Calls on one channel are matched across PEs by order, so every member makes the same sequence of
// calls on it, with the same counts and, at grid scope, the same number of CTAs.
// Compiles with a plain host compiler; the functions that use it are in shoal/dev/coll.cuh.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shoal/coll_model.hpp"
#include "shoal/detail/host_device.hpp"
#include "shoal/device_handle.hpp"
#include "shoal/team_layout.hpp"

namespace shoal {

// Which algorithm a device call runs, per collective: a forced one, or size thresholds the cost model
// set (bytes as coll_cost_terms counts them: ll up to ll_max_bytes, one_shot up to one_shot_max_bytes,
// then the large-message algorithm).
struct coll_tuning {
  std::uint64_t ll_max_bytes[kCollectiveCount] = {};
  std::uint64_t one_shot_max_bytes[kCollectiveCount] = {};
  std::int8_t forced[kCollectiveCount] = {-1, -1, -1, -1, -1, -1};  // an algorithm, or -1 for the model
};

struct team_handle {
  device_handle world;      // the world this team belongs to
  team_layout layout;       // members, as world PEs
  std::int32_t index = -1;  // this PE's index in the team, or -1 when it is not a member
  std::int32_t channel_first = 0;
  std::int32_t channel_count = 0;
  std::int32_t channel_total = 0;  // channels the team owns (the stride of the state arrays)
  std::uint32_t ll_bytes = 0;      // LL line bytes per channel, parity and member (payload is half)
  std::uint32_t staged_bytes = 0;  // staged (one_shot) bytes per channel, parity and member
  std::int32_t resident_ctas = 1;  // SMs of the smallest GPU of the job: on-stream calls use at most this many CTAs
  std::int32_t spans_nodes = 0;    // some member is on another node: its data and flags go through the proxy
  std::uint64_t* calls = nullptr;  // [channel_total] this PE's count of collective steps per channel
  std::uint64_t* flags = nullptr;  // [channel_total][size], symmetric: flag i is written by member i
  std::byte* ll = nullptr;         // [channel_total][2][size][ll_bytes], symmetric: part i written by member i
  std::byte* staged = nullptr;     // [channel_total][2][size][staged_bytes], the same for staged steps' raw data
  coll_tuning tuning;
  // This team's id on this PE, which the state's word after calls[] (live_word) holds until the team is
  // destroyed: debug builds check it at every collective, so a destroyed team's handle traps.
  std::uint64_t id = 0;

  SHOAL_HD constexpr bool member() const { return index >= 0; }
  SHOAL_HD std::uint64_t* live_word() const { return calls + channel_total; }
  SHOAL_HD constexpr int size() const { return layout.size; }

  // A view of `count` channels starting at this view's channel `first`, for concurrent collectives.
  // An out-of-range request gives a view with no channels, which device calls reject in debug builds.
  // (count <= channel_count - first: as first + count, a count near INT_MAX wrapped, passed, and gave a view
  // whose CTAs took channels past the team's state.)
  SHOAL_HD constexpr team_handle channels(int first, int count) const {
    team_handle view = *this;
    const bool ok = first >= 0 && count >= 1 && count <= channel_count - first;
    view.channel_first = ok ? channel_first + first : channel_first;
    view.channel_count = ok ? count : 0;
    return view;
  }

  // The algorithm a call of `coll` on `bytes` runs (bytes as coll_cost_terms counts them): the forced
  // one, else ll, one_shot or `large` by the model's thresholds. The same on every member.
  // A team that spans nodes runs only what the proxy can carry: puts and signals, no loads from peers
  // and no flag-in-data lines. Reductions are staged (one_shot); the exchanges use one_shot for what
  // the model gives ll, and direct (pushed into the peers' dst) for large blocks.
  SHOAL_HD constexpr algorithm pick(collective coll, std::uint64_t bytes, algorithm large) const {
    const int c = static_cast<int>(coll);
    algorithm a = large;
    if (tuning.forced[c] >= 0)
      a = static_cast<algorithm>(tuning.forced[c]);
    else if (bytes <= tuning.ll_max_bytes[c])
      a = algorithm::ll;
    else if (bytes <= tuning.one_shot_max_bytes[c])
      a = algorithm::one_shot;
    if (spans_nodes == 0) return a;
    if (coll == collective::reduce || coll == collective::reducescatter || a == algorithm::ll)
      return algorithm::one_shot;
    return a == algorithm::one_shot ? a : algorithm::direct;
  }

  // Whether a unit (the calling scope, or one CTA of a grid-scope call) whose share of a call is
  // `unit_bytes` runs `chosen` as picked. The model's thresholds assume a call spread over all channels;
  // a unit whose share needs more than a few scratch steps (a block-scope call on a large buffer) runs
  // the large algorithm instead, unless the algorithm was forced. Units on one channel have equal shares
  // on every member, so they agree.
  SHOAL_HD constexpr bool keeps_algorithm(collective coll, algorithm chosen, std::uint64_t unit_bytes) const {
    if (tuning.forced[static_cast<int>(coll)] >= 0 || spans_nodes != 0) return true;
    const std::uint64_t per_step = chosen == algorithm::ll ? ll_bytes / 2 : staged_bytes;
    return !((chosen == algorithm::ll || chosen == algorithm::one_shot) && unit_bytes > 4 * per_step);
  }

  // What a unit whose share of a `bytes` call is `unit_bytes` runs: the pick, or `large` where the
  // unit's share is too big for it (keeps_algorithm). The same on every member's unit of a channel.
  SHOAL_HD constexpr algorithm pick_for_unit(collective coll, std::uint64_t bytes, std::uint64_t unit_bytes,
                                             algorithm large) const {
    const algorithm a = pick(coll, bytes, large);
    return keeps_algorithm(coll, a, unit_bytes) ? a : large;
  }

  // The same team with `algo` forced for `coll` (as SHOAL_ALGO_<COLL> does for every call).
  SHOAL_HD constexpr team_handle with_algorithm(collective coll, algorithm algo) const {
    team_handle view = *this;
    view.tuning.forced[static_cast<int>(coll)] = static_cast<std::int8_t>(algo);
    return view;
  }
};

static_assert(std::is_trivially_copyable_v<team_handle>, "kernels take the team handle by value");
static_assert(sizeof(team_handle) <= 512, "the team handle is a kernel argument");

}  // namespace shoal
