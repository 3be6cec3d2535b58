// The machinery every collective shares.
//
// Units. A collective is carried out by units: the calling scope at thread, warp and block scope, or
// each CTA at grid scope. A unit owns one channel of the team (see team_handle.hpp) and one part of the
// data; at grid scope, CTA b owns channel first + b and part b of min(CTAs, channels) parts.
//
// Epochs. Each step of a collective on a channel takes the next value of that channel's counter (only
// the unit's leader writes it). All members run the same steps on a channel in the same order, so equal
// epochs name the same step everywhere. Flags carry 2 x epoch (+1 for a step's second meeting) and only
// grow, so they are never reset and a fast member may already be one step ahead when others look.
#pragma once

#include <cuda/atomic>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shoal/dev/coll/detail/range.hpp"
#include "shoal/dev/detail/check.cuh"
#include "shoal/dev/detail/copy.cuh"
#include "shoal/dev/detail/proxy.cuh"
#include "shoal/dev/detail/spin.cuh"
#include "shoal/dev/ordering.cuh"
#include "shoal/dev/rma.cuh"
#include "shoal/dev/scope.cuh"
#include "shoal/team_handle.hpp"

namespace shoal::detail {

template <typename Scope>
inline constexpr bool is_grid_v = std::is_same_v<Scope, grid_scope>;

// The scope a unit's threads form: the caller's scope, or the CTA at grid scope.
template <typename Scope>
using unit_scope_t = std::conditional_t<is_grid_v<Scope>, block_scope, Scope>;

// The type a collective's steps take as `Unit`: the unit's scope (its sync, leader, rank and size), and
// whether the steps carry the proxy's paths. A team within one node runs steps compiled without them:
// inlined beside the loads and stores, that code made the kernels spill registers and cost 0.3–1.3 µs
// per call on teams that never use it (perf notes 33). Only the algorithms a team across nodes runs
// (team_handle::pick: one_shot and direct) are compiled with them, which bounds the extra build time.
template <typename Scope, bool kProxied>
struct unit_steps : Scope {
  static constexpr bool proxied = kProxied;
};

// Calls body(Unit{}) with the steps a team needs: with the proxy's paths only when it spans nodes.
template <typename Scope, typename Body>
__device__ inline void with_unit_steps(Scope, const team_handle& t, Body body) {
  if (t.spans_nodes != 0)
    body(unit_steps<unit_scope_t<Scope>, true>{});
  else
    body(unit_steps<unit_scope_t<Scope>, false>{});
}

struct coll_unit {
  int channel;
  int part;
  int parts;
  bool active;  // false for CTAs beyond the channel count at grid scope: they take no share
};

// Debug builds: the view has channels, the caller is a member, and the team lives (its state's word still
// holds its id: destroy clears it before the state is freed).
__device__ inline void check_team_view([[maybe_unused]] const team_handle& t) {
  SHOAL_DEVICE_CHECK(t.world, t.channel_count >= 1, "channels in the team view", t.channel_count);
  SHOAL_DEVICE_CHECK(t.world, t.index >= 0, "this PE's index in the team (a non-member called)", t.index);
  SHOAL_DEVICE_CHECK(t.world, *static_cast<volatile const std::uint64_t*>(t.live_word()) == t.id,
                     "team used after destroy (its state's live word)",
                     *static_cast<volatile const std::uint64_t*>(t.live_word()));
}

template <typename Scope>
__device__ inline coll_unit make_unit(Scope, const team_handle& t) {
  check_team_view(t);
  if constexpr (is_grid_v<Scope>) {
    const int parts = int(grid_scope::n_blocks()) < t.channel_count ? int(grid_scope::n_blocks()) : t.channel_count;
    const int b = int(grid_scope::block_rank());
    return {t.channel_first + (b < parts ? b : 0), b, parts, b < parts};
  } else {
    return {t.channel_first, 0, 1, true};
  }
}

// One step of a collective on a channel: its epoch, and whether the channel's previous step was
// symmetric (this member heard from every member in it, which proves they had all finished the step
// before). The channel's counter keeps the epoch in its low 63 bits and that mark in the top bit.
struct step {
  std::uint64_t epoch;
  bool after_symmetric;
};
inline constexpr std::uint64_t kSymmetricMark = std::uint64_t{1} << 63;

// The step after the one whose counter word is `word` (read from t.calls[channel] by every thread of the
// unit since its last meeting); `symmetric` marks this step for the next one. The unit meets, the leader
// stores the new value.
template <typename Unit>
__device__ inline step step_from_word(Unit, const team_handle& t, int channel, std::uint64_t word, bool symmetric) {
  const step s{(word & ~kSymmetricMark) + 1, (word & kSymmetricMark) != 0};
  Unit::sync();
  if (Unit::leader()) t.calls[channel] = s.epoch | (symmetric ? kSymmetricMark : 0);
  return s;
}

// The unit's next step on its channel: every thread reads the counter, then step_from_word. The unit meets
// again before its next read (each step ends with a meeting).
template <typename Unit>
__device__ inline step next_step(Unit unit, const team_handle& t, int channel, bool symmetric) {
  return step_from_word(unit, t, channel, *const_cast<volatile std::uint64_t*>(t.calls + channel), symmetric);
}

// Member `member`'s copy of this PE's team object `p` (a symmetric address).
template <typename T>
__device__ inline T* member_ptr(const team_handle& t, T* p, int member) {
  return remote(t.world, p, t.layout.pe_at(member));
}

// Copies `bytes` from `src` to member `member`'s copy of symmetric `dst` with the `threads` threads ranked
// `rank` (the unit's, or a subset of them that all call). A member on another node gets one put through
// the proxy, posted by rank 0; a later arrive() signals behind it.
template <typename Unit>
__device__ inline void send_to_member(Unit, const team_handle& t, int member, std::byte* dst, const std::byte* src,
                                      std::size_t bytes, unsigned rank, unsigned threads) {
  const int pe = t.layout.pe_at(member);
  if constexpr (!Unit::proxied)
    copy_bytes(remote(t.world, dst, pe), src, bytes, rank, threads);
  else if (std::byte* to = ptr(t.world, dst, pe))
    copy_bytes(to, src, bytes, rank, threads);
  else if (rank == 0 && bytes != 0)
    proxy_transfer(t.world, proxy_op::put, dst, const_cast<std::byte*>(src), bytes, pe, "collective");
}

// The end of a collective on a team that spans nodes: its puts through the proxy have read their sources
// (so the caller may reuse them) once they are complete. A put of at most kProxyMaxInlineBytes carried its
// data in its descriptor, so a unit whose puts (`largest_put_bytes` each at most) were all that small has
// read its sources already and waits for nothing.
template <typename Unit>
__device__ inline void finish_proxied(Unit, const team_handle& t, std::size_t largest_put_bytes) {
  if (!Unit::proxied || proxy_put_reads_source_when_posted(largest_put_bytes)) return;
  if (Unit::leader()) proxy_quiet(t.world);
  Unit::sync();
}

__device__ inline std::uint64_t* flag_of(const team_handle& t, int channel, int member) {
  return t.flags + std::size_t(channel) * t.layout.size + member;
}

// The unit tells the members `to(i)` selects that it reached `value`: the leader stores it into its flag
// on each of them. With `release`, everything the unit wrote before (its threads met first) is visible
// to a member that sees the flag.
template <typename Unit, typename Select>
__device__ inline void arrive(Unit, const team_handle& t, int channel, std::uint64_t value, bool release, Select to) {
  Unit::sync();
  if (!Unit::leader()) return;
  if (release) cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_system);
  for (int i = 0; i < t.layout.size; ++i) {
    if (i == t.index || !to(i)) continue;
    // On another node the flag goes through the proxy, behind this PE's earlier requests to that member.
    const int pe = t.layout.pe_at(i);
    if constexpr (!Unit::proxied)
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*remote(t.world, flag_of(t, channel, t.index), pe))
          .store(value, cuda::memory_order_relaxed);
    else if (std::uint64_t* flag = ptr(t.world, flag_of(t, channel, t.index), pe))
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*flag).store(value, cuda::memory_order_relaxed);
    else
      proxy_signal(t.world, flag_of(t, channel, t.index), value, sig_op::set, pe);
  }
}

// arrive() for a unit that opens its kernel, where a system fence costs more than release stores do (perf
// notes 69, 70): each thread stores a share of the members' flags, each store a release, with no fence.
// A release store is cumulative over the unit's earlier writes, which the unit's meeting ordered before it.
// Within one node only: the proxy's requests complete only through quiet.
template <typename Unit, typename Select>
__device__ inline void arrive_each_released(Unit, const team_handle& t, int channel, std::uint64_t value, Select to) {
  static_assert(!Unit::proxied, "a team across nodes arrives after quiet, through arrive()");
  Unit::sync();
  for (int i = int(Unit::rank()); i < t.layout.size; i += int(Unit::size())) {
    if (i == t.index || !to(i)) continue;
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(
        *remote(t.world, flag_of(t, channel, t.index), t.layout.pe_at(i)))
        .store(value, cuda::memory_order_release);
  }
}

// The unit waits until every member `from(i)` selects has reached `value` (acquire: what they released
// is visible to all threads of the unit on return).
template <typename Unit, typename Select>
__device__ inline void wait_members(Unit, const team_handle& t, int channel, std::uint64_t value, Select from) {
  for (int i = int(Unit::rank()); i < t.layout.size; i += int(Unit::size())) {
    if (i == t.index || !from(i)) continue;
    std::uint64_t* flag = flag_of(t, channel, i);
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> word(*flag);
    std::uint64_t seen = 0;
    if (!spin_until([&] { return (seen = word.load(cuda::memory_order_acquire)) >= value; }, t.world.wait_timeout_ns))
      report_wait_timeout(t.world, "a team member's collective flag", flag, seen, ">=", value);
  }
  Unit::sync();
}

struct all_members_t {
  __host__ __device__ constexpr bool operator()(int) const { return true; }
};
inline constexpr all_members_t all_members{};

// A meeting of all members on the unit's channel: arrive everywhere, wait for everyone.
template <typename Unit>
__device__ inline void meet_members(Unit unit, const team_handle& t, int channel, std::uint64_t value, bool release) {
  arrive(unit, t, channel, value, release, all_members);
  wait_members(unit, t, channel, value, all_members);
}

// What member `from` sends to this PE on `channel` at `parity`: LL lines, and the staged algorithms' raw
// data. The two have regions of their own. Left in one, a staged step's bytes could hold, where a line's
// flag words sit, the very flag of a later LL step of the same parity (small integers do: the flag of
// epoch e is e), and that step would take them as its peer's line before the peer had written it.
__device__ inline std::byte* ll_lines_of(const team_handle& t, int channel, int parity, int from) {
  return t.ll + ((std::size_t(channel) * 2 + parity) * t.layout.size + from) * t.ll_bytes;
}
__device__ inline std::byte* staged_of(const team_handle& t, int channel, int parity, int from) {
  return t.staged + ((std::size_t(channel) * 2 + parity) * t.layout.size + from) * t.staged_bytes;
}

}  // namespace shoal::detail

namespace shoal::detail {

// Before a step writes into the scratch of the members `to(i)` selects, each must have finished reading
// the step that last used the same parity (epoch - 2). After a symmetric step that is proven already.
// Otherwise (after a broadcast) a flag proves it: a step's data or entry flag (2 x epoch) says the member
// finished the step before, and a done flag (2 x epoch + 1, sent by steps that are not symmetric) that
// it finished this one. A member that has sent neither yet will: no step waits on a later one.
template <typename Unit, typename Select>
__device__ inline void await_scratch_free(Unit unit, const team_handle& t, int channel, step s, Select to) {
  if (!s.after_symmetric && s.epoch >= 3) wait_members(unit, t, channel, 2 * s.epoch - 3, to);
}

// The algorithms a call compiles. The device API compiles them all and picks one per call. An on-stream
// kernel runs what the host picked before the launch, so each collective has three kernels:
//   ll_only       LL alone: inlined beside the larger algorithms, an LL call took 0.3–0.45 µs longer
//                 inside a kernel, in step with the kernel's code size rather than its registers (perf
//                 notes 42–43);
//   all_but_ll    the other algorithms, for a team within one node;
//   across_nodes  what a team that spans nodes runs (team_handle::pick), with the proxy's paths. Kept out
//                 of the other kernels, those paths no longer double their code nor, compiled into every
//                 element type and operator's kernel, the build's time (perf notes 85).
enum class algorithm_set { all, ll_only, all_but_ll, across_nodes };

// An on-stream kernel serves the teams its set is for: the host launches across_nodes exactly when the
// team spans nodes. Debug builds check it.
template <algorithm_set kSet>
__device__ inline void check_set_fits_team([[maybe_unused]] const team_handle& t) {
  if constexpr (kSet == algorithm_set::across_nodes)
    SHOAL_DEVICE_CHECK(t.world, t.spans_nodes != 0, "spans_nodes (a kernel for teams across nodes)", t.spans_nodes);
  else if constexpr (kSet == algorithm_set::all_but_ll)
    SHOAL_DEVICE_CHECK(t.world, t.spans_nodes == 0, "spans_nodes (a kernel for teams within a node)", t.spans_nodes);
}

// What a kernel of kSet runs within a node where the device picked `chosen`: the host launches no LL on an
// all_but_ll kernel (its pick was one of the others), so a pick of ll there, the device's own fit for a
// unit's smaller share, runs one_shot.
template <algorithm_set kSet>
__device__ inline algorithm runnable_within_node(algorithm chosen) {
  return kSet == algorithm_set::all || chosen != algorithm::ll ? chosen : algorithm::one_shot;
}

// Calls with shoal::ll_only store into the members' scratch directly, so every member must be on this node.
// Checked in every build (one branch on the handle); the report is out of line to keep the kernel small.
[[noreturn]] __device__ __noinline__ inline void report_ll_only_across_nodes(const device_handle& h, const char* call) {
  printf(
      "shoal: PE %d: %s with shoal::ll_only on a team that spans nodes: LL reaches members by load and store "
      "only; call it without shoal::ll_only\n",
      h.pe, call);
  __trap();
}
__device__ inline void require_one_node(const team_handle& t, const char* call) {
  if (t.spans_nodes != 0) report_ll_only_across_nodes(t.world, call);
}

}  // namespace shoal::detail
