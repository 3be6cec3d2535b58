// Reductions inside a kernel, on every member of the team with the same arguments (see team_handle.hpp
// for channels and grid scope). Buffers are symmetric; counts are in elements; Op is a shoal::op tag.
//
//   reduce(scope, t, op, dst, src, count)         all-reduce: every member's dst[k] = op over members of
//                                                 src[k]. dst may be src (in place), or must not overlap it.
//   reducescatter(scope, t, op, dst, src, count)  member i's dst[k] = op over members of src[i * count + k];
//                                                 dst and src do not overlap.
// On return `src` may be reused and `dst` holds the result for the calling unit's share (at grid scope
// the CTA's part: meet with grid_sync() before reading other parts). half and bfloat16 accumulate in
// float. Algorithms: ll (lines with flags), one_shot (each member's data staged into every peer's
// scratch, one signalled step, then a local reduction), two_shot (all-reduce: each member reduces its
// 1/n of the buffer from the peers' sources and writes the result into every member's dst, between two
// meetings), direct (reduce-scatter: each member reduces its block from the peers' sources, between two
// meetings). The cost model picks one from the size unless SHOAL_ALGO_<COLLECTIVE> forces it. Both calls
// take shoal::ll_only as an optional last argument: LL alone (coll_types.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shoal/coll_types.hpp"
#include "shoal/dev/coll/detail/ll.cuh"
#include "shoal/dev/coll/detail/loops.cuh"
#include "shoal/dev/coll/detail/unit.cuh"
#include "shoal/dev/detail/copy.cuh"

namespace shoal {

namespace detail {

// A reduction's buffers: the block member j receives starts at `src + j * block_stride` on every member
// (block_stride 0: all reduce `src` itself, the all-reduce); `count` elements per block; the result lands
// in `dst`, indexed like the block.
template <typename T>
struct reduce_plan {
  T* dst;                    // result, indexed like the block
  const T* src;              // this member's source buffer
  std::size_t count;         // elements in one block
  std::size_t block_stride;  // elements between the blocks sent to different members (0: all get src)
};

// Whether the result (dst, one block) overlaps what this member sends (its src blocks, for n members).
template <typename T>
__device__ inline bool writes_over_source(const reduce_plan<T>& p, int n) {
  const T* src_end = p.src + std::size_t(n - 1) * p.block_stride + p.count;
  return p.dst < src_end && p.src < p.dst + p.count;
}

// LL: every 8-byte word of the block goes to each member as a line; each member reduces what arrives.
template <reduce_op Op, typename T, typename Unit>
__device__ inline void reduce_ll(Unit unit, const team_handle& t, int ch, const reduce_plan<T>& p, range r) {
  const std::size_t payload = ll_payload(t);
  const int n = t.size(), me = t.index;
  const std::size_t begin = r.begin * sizeof(T), end_all = r.end * sizeof(T);
  const auto* src = reinterpret_cast<const std::byte*>(p.src);
  auto* dst = reinterpret_cast<std::byte*>(p.dst);
  const std::size_t stride = p.block_stride * sizeof(T);
  for (std::size_t off = begin; off < end_all; off += payload) {
    const std::size_t end = off + payload < end_all ? off + payload : end_all;
    prefetch_first_words<Unit>(off, end, p.block_stride == 0 ? 1 : n, [&](int j) { return src + j * stride; });
    const step s = next_step(unit, t, ch, true);
    const std::uint64_t epoch = s.epoch;
    const int parity = int(epoch & 1);
    const std::uint32_t flag = ll_flag(epoch);
    await_scratch_free(unit, t, ch, s, all_members);
    std::byte* my_lines = ll_lines_of(t, ch, parity, me);
    for (std::size_t o = off + 8 * std::size_t(Unit::rank()); o < end; o += 8 * std::size_t(Unit::size())) {
      const std::size_t m = end - o < 8 ? end - o : 8;
      const std::size_t line = (o - off) / 8 * 16;
      for (int j = 0; j < n; ++j)
        if (j != me) ll_store(member_ptr(t, my_lines, j) + line, load_word(src + j * stride + o, m), flag);
      auto acc = acc_word<T, std::uint64_t>::from(load_word(src + me * stride + o, m));
      for (int i = 0; i < n; ++i)
        if (i != me) acc.template add<Op>(ll_load(t, ll_lines_of(t, ch, parity, i) + line, flag));
      store_word(dst + o, m, acc.word());
    }
    Unit::sync();
  }
}

// The exchange half of a one-shot step on channel `ch`: this member's block for member j (`bytes` from
// `src + j * stride`) goes into its staged region on j, and the members meet. Returns the step's parity
// (where the peers' blocks now lie). `rewrites_source`: the reduction after this writes over what the puts
// read, so through the proxy they must have read it first (a put of a few bytes reads it when posted).
template <typename Unit>
__device__ inline int stage_and_meet(Unit unit, const team_handle& t, int ch, const std::byte* src, std::size_t stride,
                                     std::size_t bytes, bool rewrites_source) {
  const int n = t.size(), me = t.index;
  const step s = next_step(unit, t, ch, true);
  const int parity = int(s.epoch & 1);
  await_scratch_free(unit, t, ch, s, all_members);
  std::byte* mine = staged_of(t, ch, parity, me);
  for (int j = 0; j < n; ++j)
    if (j != me) send_to_member(unit, t, j, mine, src + j * stride, bytes, Unit::rank(), Unit::size());
  meet_members(unit, t, ch, 2 * s.epoch, true);
  // Through the proxy a peer's data can arrive before the proxy has read ours. Otherwise the steps of every
  // channel stay in flight together, and finish_proxied waits once at the end of the call.
  if (Unit::proxied && rewrites_source && !proxy_put_reads_source_when_posted(bytes)) {
    if (Unit::leader()) proxy_quiet(t.world);
    Unit::sync();
  }
  return parity;
}

// stage_and_meet for a team across nodes in the on-stream kernels of that set (algorithm_set::across_nodes),
// compiled once per unit type rather than inlined into every element type and operator's kernel: the
// proxy's paths are most of a reduction's code, and a step through the network does not feel a call. Not
// in the device API: a call there took a user's kernel from 128 registers to 168 (perf notes 85).
template <typename Unit>
__device__ __noinline__ int stage_and_meet_out_of_line(Unit unit, const team_handle& t, int ch, const std::byte* src,
                                                       std::size_t stride, std::size_t bytes, bool rewrites_source) {
  return stage_and_meet(unit, t, ch, src, stride, bytes, rewrites_source);
}

// One-shot: stage each member's block into its peers' scratch, one signalled step, reduce locally.
// kStageOutOfLine: through stage_and_meet_out_of_line.
template <reduce_op Op, source_loads kLoads, bool kStageOutOfLine = false, typename T, typename Unit>
__device__ inline void reduce_staged(Unit unit, const team_handle& t, int ch, const reduce_plan<T>& p, range r) {
  const std::size_t capacity = t.staged_bytes / sizeof(T);
  const int n = t.size(), me = t.index;
  const bool in_place = writes_over_source(p, n);
  for (std::size_t off = r.begin; off < r.end; off += capacity) {
    const std::size_t len = r.end - off < capacity ? r.end - off : capacity;
    const auto* src = reinterpret_cast<const std::byte*>(p.src + off);
    const std::size_t stride = p.block_stride * sizeof(T);
    int parity;
    if constexpr (kStageOutOfLine)
      parity = stage_and_meet_out_of_line(unit, t, ch, src, stride, len * sizeof(T), in_place);
    else
      parity = stage_and_meet(unit, t, ch, src, stride, len * sizeof(T), in_place);
    reduce_sources<Op, T, kLoads>(
        len, n,
        [&](int s) {
          // Source 0 is this member's own block; the others are the peers' staged blocks, in order.
          if (s == 0) return p.src + me * p.block_stride + off;
          const int from = s <= me ? s - 1 : s;
          return reinterpret_cast<const T*>(staged_of(t, ch, parity, from));
        },
        1, [&](int) { return p.dst + off; }, Unit::rank(), Unit::size());
  }
  Unit::sync();
}

// Pull: after an entry meeting (every member's src is ready), reduce the elements [r) of block `block`
// from every member's src, write the result to each dst in `targets` (this member's dst, or every
// member's: the all-gather half of two-shot), then an exit meeting (reads done, writes visible).
template <reduce_op Op, source_loads kLoads, typename T, typename Unit>
__device__ inline void reduce_pull(Unit unit, const team_handle& t, int ch, const reduce_plan<T>& p, range r, int block,
                                   bool write_everywhere) {
  const int n = t.size(), me = t.index;
  const std::uint64_t epoch = next_step(unit, t, ch, true).epoch;
  meet_members(unit, t, ch, 2 * epoch, true);
  const T* src = p.src + block * p.block_stride + r.begin;
  reduce_sources<Op, T, kLoads>(
      r.size(), n, [&](int s) { return s == 0 ? src : member_ptr(t, src, s <= me ? s - 1 : s); },
      write_everywhere ? n : 1,
      [&](int d) { return d == 0 ? p.dst + r.begin : member_ptr(t, p.dst + r.begin, d <= me ? d - 1 : d); },
      Unit::rank(), Unit::size());
  meet_members(unit, t, ch, 2 * epoch + 1, true);
}

// Only kernels of one algorithm family load sources in pairs (see source_loads).
template <algorithm_set kSet>
inline constexpr source_loads kLoadsOf =
    kSet == algorithm_set::all ? source_loads::one_at_a_time : source_loads::in_pairs;

// The pulls (two-shot, direct) of a block-scope call are one CTA moving the whole buffer: pipelined there.
template <algorithm_set kSet, typename Scope>
inline constexpr source_loads kPullLoadsOf =
    kSet == algorithm_set::all&& std::is_same_v<Scope, block_scope> ? source_loads::pipelined : kLoadsOf<kSet>;

// dst holds `count` elements, src `src_blocks` blocks of them. The byte counts are checked for overflow first:
// a wrapped product is small and would pass the range checks. dst may be src itself (the all-reduce in place)
// and must not overlap it otherwise: a member would write what its peers still read.
template <typename T>
__device__ inline void check_reduce_args(const team_handle& t, const T* dst, const T* src, std::size_t count,
                                         int src_blocks) {
  SHOAL_DEVICE_CHECK(t.world, product_fits(count, sizeof(T) * std::size_t(src_blocks > 1 ? src_blocks : 1)),
                     "count (x the element size and the source blocks overflows)", count);
  SHOAL_CHECK_SYMMETRIC(t.world, dst, count * sizeof(T));
  SHOAL_CHECK_SYMMETRIC(t.world, src, count * sizeof(T) * std::size_t(src_blocks));
  SHOAL_DEVICE_CHECK(t.world,
                     (src_blocks == 1 && dst == src) ||
                         !ranges_overlap(dst, count * sizeof(T), src, count * sizeof(T) * std::size_t(src_blocks)),
                     "dst overlaps src (dst - src, elements)", dst - src);
}

// A reduction on a team that spans nodes: one_shot, with the proxy's paths (the only pick there).
template <reduce_op Op, source_loads kLoads, bool kStageOutOfLine, typename UnitScope, typename T>
__device__ inline void reduce_across_nodes(const team_handle& t, int ch, const reduce_plan<T>& p, range r) {
  const unit_steps<UnitScope, true> unit;
  reduce_staged<Op, kLoads, kStageOutOfLine>(unit, t, ch, p, r);
  finish_proxied(unit, t, r.size() * sizeof(T));  // each put sends at most the unit's range
}

// shoal::reduce (kScatter false: every block is src itself) and shoal::reducescatter (true: member j's
// block starts at src + j * count) with the algorithms of `kSet` (see algorithm_set).
template <algorithm_set kSet, bool kScatter, typename Scope, reduce_op Op, typename T>
__device__ inline void reduce_with(Scope scope, const team_handle& t, T* dst, const T* src, std::size_t count) {
  check_reduce_args(t, dst, src, count, kScatter ? t.size() : 1);
  check_set_fits_team<kSet>(t);
  const coll_unit u = make_unit(scope, t);
  if (!u.active) return;
  const reduce_plan<T> plan{dst, src, count, kScatter ? count : 0};
  const range r = split_range(count, 16 / sizeof(T), u.part, u.parts);
  constexpr source_loads kLoads = kLoadsOf<kSet>;
  using within_node = unit_steps<unit_scope_t<Scope>, false>;
  if constexpr (kSet == algorithm_set::ll_only) {
    reduce_ll<Op>(within_node{}, t, u.channel, plan, r);
  } else if constexpr (kSet == algorithm_set::across_nodes) {
    reduce_across_nodes<Op, kLoads, true, unit_scope_t<Scope>>(t, u.channel, plan, r);
  } else {
    const collective coll = kScatter ? collective::reducescatter : collective::reduce;
    const algorithm chosen = t.pick_for_unit(coll, count * sizeof(T), r.size() * sizeof(T),
                                             kScatter ? algorithm::direct : algorithm::two_shot);
    if constexpr (kSet == algorithm_set::all)
      if (t.spans_nodes != 0) return reduce_across_nodes<Op, kLoads, false, unit_scope_t<Scope>>(t, u.channel, plan, r);
    switch (runnable_within_node<kSet>(chosen)) {
      case algorithm::ll:
        if constexpr (kSet == algorithm_set::all) reduce_ll<Op>(within_node{}, t, u.channel, plan, r);
        break;
      case algorithm::one_shot:
        reduce_staged<Op, kLoads>(within_node{}, t, u.channel, plan, r);
        break;
      default:
        if constexpr (kScatter) {
          reduce_pull<Op, kPullLoadsOf<kSet, Scope>>(within_node{}, t, u.channel, plan, r, t.index, false);
        } else {
          // Two-shot: member i reduces the i-th of n slices of the unit's range and writes it everywhere.
          const range mine = split_range(r.size(), 16 / sizeof(T), t.index, t.size());
          reduce_pull<Op, kPullLoadsOf<kSet, Scope>>(within_node{}, t, u.channel, plan,
                                                     {r.begin + mine.begin, r.begin + mine.end}, 0, true);
        }
        break;
    }
  }
}

template <algorithm_set kSet, typename Scope, reduce_op Op, typename T>
__device__ inline void reduce(Scope scope, const team_handle& t, T* dst, const T* src, std::size_t count) {
  reduce_with<kSet, false, Scope, Op>(scope, t, dst, src, count);
}
template <algorithm_set kSet, typename Scope, reduce_op Op, typename T>
__device__ inline void reducescatter(Scope scope, const team_handle& t, T* dst, const T* src, std::size_t count) {
  reduce_with<kSet, true, Scope, Op>(scope, t, dst, src, count);
}

}  // namespace detail

template <typename Scope, reduce_op Op, typename T>
__device__ inline void reduce(Scope scope, const team_handle& t, op_tag<Op>, T* dst, const T* src, std::size_t count) {
  static_assert(op_defined_for_v<T, Op>, "reduce: the operator is not defined for this element type");
  detail::reduce<detail::algorithm_set::all, Scope, Op>(scope, t, dst, src, count);
}

template <typename Scope, reduce_op Op, typename T>
__device__ inline void reducescatter(Scope scope, const team_handle& t, op_tag<Op>, T* dst, const T* src,
                                     std::size_t count) {
  static_assert(op_defined_for_v<T, Op>, "reducescatter: the operator is not defined for this element type");
  detail::reducescatter<detail::algorithm_set::all, Scope, Op>(scope, t, dst, src, count);
}

// The same with shoal::ll_only: LL at every size, nothing else compiled (see ll_only_t).
template <typename Scope, reduce_op Op, typename T>
__device__ inline void reduce(Scope scope, const team_handle& t, op_tag<Op>, T* dst, const T* src, std::size_t count,
                              ll_only_t) {
  static_assert(op_defined_for_v<T, Op>, "reduce: the operator is not defined for this element type");
  detail::require_one_node(t, "shoal::reduce");
  detail::reduce<detail::algorithm_set::ll_only, Scope, Op>(scope, t, dst, src, count);
}

template <typename Scope, reduce_op Op, typename T>
__device__ inline void reducescatter(Scope scope, const team_handle& t, op_tag<Op>, T* dst, const T* src,
                                     std::size_t count, ll_only_t) {
  static_assert(op_defined_for_v<T, Op>, "reducescatter: the operator is not defined for this element type");
  detail::require_one_node(t, "shoal::reducescatter");
  detail::reducescatter<detail::algorithm_set::ll_only, Scope, Op>(scope, t, dst, src, count);
}

}  // namespace shoal
