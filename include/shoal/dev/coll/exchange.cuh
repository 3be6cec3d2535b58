// Data-moving collectives inside a kernel: broadcast, fcollect (all-gather) and alltoall.
// Call them with every thread of the scope, on every member of the team, with the same arguments
// (see team_handle.hpp for channels and grid scope). Buffers are symmetric, `dst` and `src` do not
// overlap (except dst == src at the root of a broadcast), counts are in elements.
//
//   broadcast(scope, t, dst, src, count, root)  root's src[0, count) lands in every member's dst.
//   fcollect(scope, t, dst, src, count)         member i's src lands in every dst[i * count, +count).
//   alltoall(scope, t, dst, src, count)         member i's src[j * count, +count) lands in member j's
//                                               dst[i * count, +count).
// On return `src` may be reused and `dst` holds the result, for the calling unit's share: the whole
// buffer at thread, warp and block scope; at grid scope the CTA's part, so meet with grid_sync() before
// reading parts other CTAs received. Algorithms: ll (lines with flags, one step), one_shot (staged
// through the team's scratch, one signalled step), direct (straight into the peers' dst between two
// meetings); the cost model picks one from the size unless SHOAL_ALGO_<COLLECTIVE> forces it. Each call
// and its _bytes form take shoal::ll_only as an optional last argument: LL alone (coll_types.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shoal/coll_types.hpp"
#include "shoal/dev/coll/detail/ll.cuh"
#include "shoal/dev/coll/detail/unit.cuh"
#include "shoal/dev/detail/copy.cuh"

namespace shoal {

namespace detail {

// Sends block `send_block(j)` of `bytes` to member j's dst[me] for every member j selected by `sends_to`,
// and receives from every member selected by `receives_from` into dst[i]; only the unit's range `r` of
// each block moves. Member i's block lands at dst + i * dst_stride.
struct exchange_plan {
  std::byte* dst;
  std::size_t dst_stride;  // bytes between received blocks in dst (0: all land at dst, as in broadcast)
  std::size_t bytes;       // one block
  bool symmetric;          // every member sends to every member (fcollect, alltoall; not broadcast)
};

template <typename Unit, typename SendBlock, typename SendsTo, typename ReceivesFrom>
__device__ inline void exchange_ll(Unit unit, const team_handle& t, int ch, const exchange_plan& p, range r,
                                   SendBlock send_block, SendsTo sends_to, ReceivesFrom receives_from) {
  const std::size_t payload = ll_payload(t);
  const int n = t.size(), me = t.index;
  for (std::size_t off = r.begin; off < r.end; off += payload) {
    const std::size_t end = off + payload < r.end ? off + payload : r.end;
    prefetch_first_words<Unit>(off, end, n, [&](int j) { return sends_to(j) ? send_block(j) : nullptr; });
    const step s = next_step(unit, t, ch, p.symmetric);
    const std::uint64_t epoch = s.epoch;
    const int parity = int(epoch & 1);
    const std::uint32_t flag = ll_flag(epoch);
    await_scratch_free(unit, t, ch, s, [&](int j) { return sends_to(j); });
    std::byte* my_lines = ll_lines_of(t, ch, parity, me);
    for (std::size_t o = off + 8 * std::size_t(Unit::rank()); o < end; o += 8 * std::size_t(Unit::size())) {
      const std::size_t m = end - o < 8 ? end - o : 8;
      const std::size_t line = (o - off) / 8 * 16;
      for (int j = 0; j < n; ++j) {
        if (!sends_to(j)) continue;
        const std::uint64_t word = load_word(send_block(j) + o, m);
        if (j == me) {
          if (receives_from(me)) store_word(p.dst + me * p.dst_stride + o, m, word);
        } else {
          ll_store(member_ptr(t, my_lines, j) + line, word, flag);
        }
      }
      for (int i = 0; i < n; ++i)
        if (i != me && receives_from(i))
          store_word(p.dst + i * p.dst_stride + o, m, ll_load(t, ll_lines_of(t, ch, parity, i) + line, flag));
    }
    // A step that is not symmetric says when it is done with its lines (see await_scratch_free).
    if (!p.symmetric) arrive(unit, t, ch, 2 * epoch + 1, false, all_members);
    Unit::sync();
  }
}

template <typename Unit, typename SendBlock, typename SendsTo, typename ReceivesFrom>
__device__ inline void exchange_staged(Unit unit, const team_handle& t, int ch, const exchange_plan& p, range r,
                                       SendBlock send_block, SendsTo sends_to, ReceivesFrom receives_from) {
  const std::size_t capacity = t.staged_bytes;
  const int n = t.size(), me = t.index;
  const bool receives_any = [&] {
    for (int i = 0; i < n; ++i)
      if (i != me && receives_from(i)) return true;
    return false;
  }();
  for (std::size_t off = r.begin; off < r.end; off += capacity) {
    const std::size_t len = r.end - off < capacity ? r.end - off : capacity;
    const step s = next_step(unit, t, ch, p.symmetric);
    const std::uint64_t epoch = s.epoch;
    const int parity = int(epoch & 1);
    await_scratch_free(unit, t, ch, s, [&](int j) { return j != me && sends_to(j); });
    std::byte* mine = staged_of(t, ch, parity, me);
    for (int j = 0; j < n; ++j)
      if (j != me && sends_to(j))
        send_to_member(unit, t, j, mine, send_block(j) + off, len, Unit::rank(), Unit::size());
    // The own block last: its local copy (HBM) then runs while the remote stores drain over NVLink, instead
    // of delaying them on the members that come first (perf notes 38).
    std::byte* const own_to = p.dst + me * p.dst_stride + off;
    if (sends_to(me) && receives_from(me) && own_to != send_block(me) + off)
      copy_bytes(own_to, send_block(me) + off, len, Unit::rank(), Unit::size());
    // Data-ready flags go to every member (those who got no data take them as progress, see
    // await_scratch_free); a member that receives nothing this step says it is done at once.
    arrive(unit, t, ch, receives_any ? 2 * epoch : 2 * epoch + 1, true, all_members);
    wait_members(unit, t, ch, 2 * epoch, [&](int i) { return receives_from(i); });
    for (int i = 0; i < n; ++i)
      if (i != me && receives_from(i))
        copy_bytes<true>(p.dst + i * p.dst_stride + off, staged_of(t, ch, parity, i), len, Unit::rank(), Unit::size());
  }
  Unit::sync();
}

// Straight into the receivers' dst, between an entry meeting (receivers are in the call, so their dst
// may be overwritten) and an exit meeting (the data has arrived).
template <typename Unit, typename SendBlock, typename SendsTo, typename ReceivesFrom>
__device__ inline void exchange_direct(Unit unit, const team_handle& t, int ch, const exchange_plan& p, range r,
                                       SendBlock send_block, SendsTo sends_to, ReceivesFrom receives_from) {
  const int n = t.size(), me = t.index;
  const std::uint64_t epoch = next_step(unit, t, ch, p.symmetric).epoch;
  arrive(unit, t, ch, 2 * epoch, true, all_members);
  wait_members(unit, t, ch, 2 * epoch, [&](int j) { return sends_to(j); });
  // This member's own block is copied by a few warps while the others send to the peers, so the local
  // copy (HBM) runs during the remote ones (NVLink) instead of before them. An eighth of the threads
  // copy locally faster than the rest can send, since a remote block moves at NVLink speed.
  std::byte* const own_to = p.dst + me * p.dst_stride + r.begin;
  const bool local = sends_to(me) && receives_from(me) && own_to != send_block(me) + r.begin;
  bool remote = false;
  for (int j = 0; j < n; ++j) remote |= j != me && sends_to(j);
  const unsigned local_threads = local && remote && Unit::size() >= 256 ? Unit::size() / 8 : 0;
  const bool copies_locally = Unit::rank() < local_threads;
  const unsigned rank = copies_locally ? Unit::rank() : Unit::rank() - local_threads;
  const unsigned threads = copies_locally ? local_threads : Unit::size() - local_threads;
  for (int j = 0; j < n; ++j) {
    if (!sends_to(j)) continue;
    if (j == me ? !local || (local_threads != 0 && !copies_locally) : copies_locally) continue;
    // One copy loop for the own block and the peers' where every member is load/store reachable.
    if (j == me || !Unit::proxied)
      copy_bytes(j == me ? own_to : member_ptr(t, own_to, j), send_block(j) + r.begin, r.size(), rank, threads);
    else
      send_to_member(unit, t, j, own_to, send_block(j) + r.begin, r.size(), rank, threads);
  }
  arrive(unit, t, ch, 2 * epoch + 1, true, all_members);
  wait_members(unit, t, ch, 2 * epoch + 1, [&](int i) { return receives_from(i); });
}

// An exchange on a team that spans nodes: one_shot or direct, with the proxy's paths (team_handle::pick).
template <typename UnitScope, typename SendBlock, typename SendsTo, typename ReceivesFrom>
__device__ inline void exchange_across_nodes(const team_handle& t, int ch, algorithm chosen, const exchange_plan& p,
                                             range r, SendBlock send_block, SendsTo sends_to,
                                             ReceivesFrom receives_from) {
  const unit_steps<UnitScope, true> unit;
  if (chosen == algorithm::direct)
    exchange_direct(unit, t, ch, p, r, send_block, sends_to, receives_from);
  else
    exchange_staged(unit, t, ch, p, r, send_block, sends_to, receives_from);
  finish_proxied(unit, t, r.size());  // each put sends at most this unit's part of a block
}

// With the algorithms of `kSet` (see algorithm_set).
template <algorithm_set kSet, typename Scope, typename SendBlock, typename SendsTo, typename ReceivesFrom>
__device__ inline void exchange(Scope scope, const team_handle& t, collective coll, const exchange_plan& p,
                                SendBlock send_block, SendsTo sends_to, ReceivesFrom receives_from) {
  check_set_fits_team<kSet>(t);
  const coll_unit u = make_unit(scope, t);
  if (!u.active) return;
  const range r = split_range(p.bytes, 16, u.part, u.parts);
  using within_node = unit_steps<unit_scope_t<Scope>, false>;
  if constexpr (kSet == algorithm_set::ll_only) {
    exchange_ll(within_node{}, t, u.channel, p, r, send_block, sends_to, receives_from);
  } else {
    // The model is asked with OpenSHMEM's byte count of the whole call, the same on every member.
    const algorithm chosen = t.pick_for_unit(coll, p.bytes, r.size(), algorithm::direct);
    if constexpr (kSet == algorithm_set::across_nodes) {
      exchange_across_nodes<unit_scope_t<Scope>>(t, u.channel, chosen, p, r, send_block, sends_to, receives_from);
    } else {
      if constexpr (kSet == algorithm_set::all)
        if (t.spans_nodes != 0)
          return exchange_across_nodes<unit_scope_t<Scope>>(t, u.channel, chosen, p, r, send_block, sends_to,
                                                            receives_from);
      switch (runnable_within_node<kSet>(chosen)) {
        case algorithm::ll:
          if constexpr (kSet == algorithm_set::all)
            exchange_ll(within_node{}, t, u.channel, p, r, send_block, sends_to, receives_from);
          break;
        case algorithm::one_shot:
          exchange_staged(within_node{}, t, u.channel, p, r, send_block, sends_to, receives_from);
          break;
        default:
          exchange_direct(within_node{}, t, u.channel, p, r, send_block, sends_to, receives_from);
          break;
      }
    }
  }
}

// count x sizeof(T) for the typed calls; debug builds trap where the product overflows.
template <typename T>
__device__ inline std::size_t bytes_of(const team_handle& t, std::size_t count) {
  SHOAL_DEVICE_CHECK(t.world, product_fits(count, sizeof(T)), "count (x the element size overflows)", count);
  return count * sizeof(T);
}

template <algorithm_set kSet, typename Scope>
__device__ inline void broadcast_bytes(Scope scope, const team_handle& t, void* dst, const void* src, std::size_t bytes,
                                       int root) {
  SHOAL_DEVICE_CHECK(t.world, root >= 0 && root < t.size(), "broadcast root (team index)", root);
  SHOAL_CHECK_SYMMETRIC(t.world, dst, bytes);
  SHOAL_CHECK_SYMMETRIC(t.world, src, bytes);  // on every member, as on a stream: only the root's is read
  SHOAL_DEVICE_CHECK(t.world, dst == src || !ranges_overlap(dst, bytes, src, bytes), "dst overlaps src (dst - src)",
                     static_cast<const std::byte*>(dst) - static_cast<const std::byte*>(src));
  auto* from = static_cast<const std::byte*>(src);
  const int me = t.index;
  exchange<kSet>(
      scope, t, collective::broadcast, exchange_plan{static_cast<std::byte*>(dst), 0, bytes, false},
      [=](int) { return from; }, [=](int) { return me == root; }, [=](int i) { return i == root; });
}

template <algorithm_set kSet, typename Scope>
__device__ inline void fcollect_bytes(Scope scope, const team_handle& t, void* dst, const void* src,
                                      std::size_t bytes) {
  SHOAL_DEVICE_CHECK(t.world, product_fits(bytes, std::size_t(t.size())), "bytes (x the team size overflows)", bytes);
  SHOAL_CHECK_SYMMETRIC(t.world, dst, bytes * t.size());
  SHOAL_CHECK_SYMMETRIC(t.world, src, bytes);
  // In place, src is this member's block of dst; any other overlap is refused.
  SHOAL_DEVICE_CHECK(t.world,
                     src == static_cast<const std::byte*>(dst) + std::size_t(t.index) * bytes ||
                         !ranges_overlap(dst, bytes * t.size(), src, bytes),
                     "dst overlaps src (dst - src)",
                     static_cast<const std::byte*>(dst) - static_cast<const std::byte*>(src));
  auto* from = static_cast<const std::byte*>(src);
  exchange<kSet>(
      scope, t, collective::fcollect, exchange_plan{static_cast<std::byte*>(dst), bytes, bytes, true},
      [=](int) { return from; }, all_members, all_members);
}

template <algorithm_set kSet, typename Scope>
__device__ inline void alltoall_bytes(Scope scope, const team_handle& t, void* dst, const void* src,
                                      std::size_t bytes) {
  SHOAL_DEVICE_CHECK(t.world, product_fits(bytes, std::size_t(t.size())), "bytes (x the team size overflows)", bytes);
  SHOAL_CHECK_SYMMETRIC(t.world, dst, bytes * t.size());
  SHOAL_CHECK_SYMMETRIC(t.world, src, bytes * t.size());
  SHOAL_DEVICE_CHECK(t.world, !ranges_overlap(dst, bytes * t.size(), src, bytes * t.size()),
                     "dst overlaps src (dst - src)",
                     static_cast<const std::byte*>(dst) - static_cast<const std::byte*>(src));
  auto* from = static_cast<const std::byte*>(src);
  exchange<kSet>(
      scope, t, collective::alltoall, exchange_plan{static_cast<std::byte*>(dst), bytes, bytes, true},
      [=](int j) { return from + j * bytes; }, all_members, all_members);
}

}  // namespace detail

template <typename Scope>
__device__ inline void broadcast_bytes(Scope scope, const team_handle& t, void* dst, const void* src, std::size_t bytes,
                                       int root) {
  detail::broadcast_bytes<detail::algorithm_set::all>(scope, t, dst, src, bytes, root);
}

template <typename Scope>
__device__ inline void fcollect_bytes(Scope scope, const team_handle& t, void* dst, const void* src,
                                      std::size_t bytes) {
  detail::fcollect_bytes<detail::algorithm_set::all>(scope, t, dst, src, bytes);
}

template <typename Scope>
__device__ inline void alltoall_bytes(Scope scope, const team_handle& t, void* dst, const void* src,
                                      std::size_t bytes) {
  detail::alltoall_bytes<detail::algorithm_set::all>(scope, t, dst, src, bytes);
}

// The same with shoal::ll_only: LL at every size, nothing else compiled (see ll_only_t).
template <typename Scope>
__device__ inline void broadcast_bytes(Scope scope, const team_handle& t, void* dst, const void* src, std::size_t bytes,
                                       int root, ll_only_t) {
  detail::require_one_node(t, "shoal::broadcast");
  detail::broadcast_bytes<detail::algorithm_set::ll_only>(scope, t, dst, src, bytes, root);
}

template <typename Scope>
__device__ inline void fcollect_bytes(Scope scope, const team_handle& t, void* dst, const void* src, std::size_t bytes,
                                      ll_only_t) {
  detail::require_one_node(t, "shoal::fcollect");
  detail::fcollect_bytes<detail::algorithm_set::ll_only>(scope, t, dst, src, bytes);
}

template <typename Scope>
__device__ inline void alltoall_bytes(Scope scope, const team_handle& t, void* dst, const void* src, std::size_t bytes,
                                      ll_only_t) {
  detail::require_one_node(t, "shoal::alltoall");
  detail::alltoall_bytes<detail::algorithm_set::ll_only>(scope, t, dst, src, bytes);
}

template <typename Scope, typename T>
__device__ inline void broadcast(Scope scope, const team_handle& t, T* dst, const T* src, std::size_t count, int root) {
  static_assert(std::is_trivially_copyable_v<T>);
  broadcast_bytes(scope, t, dst, src, detail::bytes_of<T>(t, count), root);
}
template <typename Scope, typename T>
__device__ inline void fcollect(Scope scope, const team_handle& t, T* dst, const T* src, std::size_t count) {
  static_assert(std::is_trivially_copyable_v<T>);
  fcollect_bytes(scope, t, dst, src, detail::bytes_of<T>(t, count));
}
template <typename Scope, typename T>
__device__ inline void alltoall(Scope scope, const team_handle& t, T* dst, const T* src, std::size_t count) {
  static_assert(std::is_trivially_copyable_v<T>);
  alltoall_bytes(scope, t, dst, src, detail::bytes_of<T>(t, count));
}

template <typename Scope, typename T>
__device__ inline void broadcast(Scope scope, const team_handle& t, T* dst, const T* src, std::size_t count, int root,
                                 ll_only_t ll) {
  static_assert(std::is_trivially_copyable_v<T>);
  broadcast_bytes(scope, t, dst, src, detail::bytes_of<T>(t, count), root, ll);
}
template <typename Scope, typename T>
__device__ inline void fcollect(Scope scope, const team_handle& t, T* dst, const T* src, std::size_t count,
                                ll_only_t ll) {
  static_assert(std::is_trivially_copyable_v<T>);
  fcollect_bytes(scope, t, dst, src, detail::bytes_of<T>(t, count), ll);
}
template <typename Scope, typename T>
__device__ inline void alltoall(Scope scope, const team_handle& t, T* dst, const T* src, std::size_t count,
                                ll_only_t ll) {
  static_assert(std::is_trivially_copyable_v<T>);
  alltoall_bytes(scope, t, dst, src, detail::bytes_of<T>(t, count), ll);
}

}  // namespace shoal
