// The on-stream reductions for one element type: SHOAL_INSTANTIATE_REDUCE_ON_STREAM(T) in a .cu file
// defines reduce_on_stream<T> and reducescatter_on_stream<T>. Kernels exist per storage type and
// operator: integer sum, prod and bit operators run on the unsigned type of the same width (the same
// bits, and no signed overflow); min and max keep the signedness. So int, unsigned and every 32-bit integer type share one sum kernel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "coll/copy_engine_reduce.hpp"
#include "coll/hierarchical.hpp"
#include "coll/stream_common.hpp"
#include "shoal/dev/coll.cuh"

namespace shoal::detail {

// Every on-stream collective kernel runs at most kCollThreads threads per CTA (the bound keeps the register
// budget within what such a launch allows; LL launches take one thread per word of a CTA's share). Each
// comes as three kernels, one per algorithm_set (LL, the others within a node, across nodes): the host
// launches the one its pick and the team need (kernel_for).
template <typename T, reduce_op Op, algorithm_set kSet>
__global__ void __launch_bounds__(kCollThreads) reduce_kernel(team_handle t, T* dst, const T* src, std::size_t count) {
  prefetch_source(src, count * sizeof(T));
  await_previous_kernel();
  detail::reduce<kSet, grid_scope, Op>(grid, t, dst, src, count);
}
template <typename T, reduce_op Op, algorithm_set kSet>
__global__ void __launch_bounds__(kCollThreads)
    reducescatter_kernel(team_handle t, T* dst, const T* src, std::size_t count) {
  prefetch_source(src, count * sizeof(T) * t.size());
  await_previous_kernel();
  detail::reducescatter<kSet, grid_scope, Op>(grid, t, dst, src, count);
}

template <std::size_t Bytes, bool Signed>
struct fixed_int;
template <> struct fixed_int<1, true> { using type = std::int8_t; };
template <> struct fixed_int<2, true> { using type = std::int16_t; };
template <> struct fixed_int<4, true> { using type = std::int32_t; };
template <> struct fixed_int<8, true> { using type = std::int64_t; };
template <> struct fixed_int<1, false> { using type = std::uint8_t; };
template <> struct fixed_int<2, false> { using type = std::uint16_t; };
template <> struct fixed_int<4, false> { using type = std::uint32_t; };
template <> struct fixed_int<8, false> { using type = std::uint64_t; };

// The type the kernel of `Op` runs on for elements of T.
template <typename T, reduce_op Op>
using storage_t = std::conditional_t<
    std::is_integral_v<T>,
    typename fixed_int<sizeof(T), std::is_signed_v<T> && (Op == reduce_op::min || Op == reduce_op::max)>::type, T>;

// One chunk of a two-member reduction with the copy engines: dst[k] = op(dst[k], src[k]), all local.
template <typename T, reduce_op Op>
__global__ void __launch_bounds__(kCollThreads) combine_kernel(T* dst, const T* src, std::size_t count) {
  await_previous_kernel();
  const unsigned threads = gridDim.x * blockDim.x, rank = blockIdx.x * blockDim.x + threadIdx.x;
  reduce_sources<Op, T, source_loads::in_pairs>(
      count, 2, [&](int s) { return s == 0 ? static_cast<const T*>(dst) : src; }, 1, [&](int) { return dst; }, rank,
      threads);
}

template <typename T, reduce_op Op>
void launch_combine(const team& t, unsigned sms, void* dst, const void* src, std::size_t count, cudaStream_t stream) {
  if constexpr (op_defined_for_v<T, Op>) {
    using S = storage_t<T, Op>;
    // Up to two CTAs of 512 threads per SM, 16 KiB each at least, keep HBM busy; the copy engines need no SMs.
    const unsigned ctas = unsigned(std::min<std::size_t>(2 * std::size_t(sms), (count * sizeof(T) + 16383) / 16384));
    launch_coll(t, combine_kernel<S, Op>, {ctas, kCollThreads}, stream, "shoal::reduce_on_stream (copy engines)",
                static_cast<S*>(dst), static_cast<const S*>(src), count);
  }
}

// Calls f(op_tag<Op>{}) for the operator `op` names.
template <typename F>
void visit_op(reduce_op op, F&& f) {
  switch (op) {
    case reduce_op::sum:
      return f(op_tag<reduce_op::sum>{});
    case reduce_op::prod:
      return f(op_tag<reduce_op::prod>{});
    case reduce_op::min:
      return f(op_tag<reduce_op::min>{});
    case reduce_op::max:
      return f(op_tag<reduce_op::max>{});
    case reduce_op::bit_and:
      return f(op_tag<reduce_op::bit_and>{});
    case reduce_op::bit_or:
      return f(op_tag<reduce_op::bit_or>{});
    case reduce_op::bit_xor:
      return f(op_tag<reduce_op::bit_xor>{});
  }
}

template <bool kScatter, typename T, reduce_op Op>
void launch_reduce(const team& t, const team_handle& h, algorithm algo, coll_launch launch, T* dst, const T* src,
                   std::size_t count, cudaStream_t stream, const char* call) {
  if constexpr (op_defined_for_v<T, Op>) {
    using S = storage_t<T, Op>;
    const auto kernel = [&]<algorithm_set kSet> {
      return kScatter ? reducescatter_kernel<S, Op, kSet> : reduce_kernel<S, Op, kSet>;
    };
    const coll_kernels kernels{kernel.template operator()<algorithm_set::ll_only>(),
                               kernel.template operator()<algorithm_set::all_but_ll>(),
                               kernel.template operator()<algorithm_set::across_nodes>()};
    const collective coll = kScatter ? collective::reducescatter : collective::reduce;
    launch_coll(t, kernel_for(h, coll, algo, count * sizeof(T), launch, kernels), launch, stream, call, h,
                reinterpret_cast<S*>(dst), reinterpret_cast<const S*>(src), count);
  }
}

template <bool kScatter, typename T>
void reduce_on_stream_impl(const team& t, T* dst, const T* src, std::size_t count, reduce_op op, cudaStream_t stream,
                           channel_range channels);

// coll/hierarchical.hpp, in chunks of m q_j elements (q_j each PE's share of chunk j): member r of its node
// (m PEs) reduces the node's share r of a chunk into that chunk's dst[r q_j, (r + 1) q_j), all-reduces it in
// place with the PEs of local rank r on the other nodes (on the network stream), and the node gathers the
// shares into every member's dst (in place: each member's share is already where it goes). The caller's
// stream runs chunk j + 1's reduce-scatter before chunk j's all-gather, so the network always has the next
// chunk ready. The count % m elements past the chunks go flat. dst and src do not overlap
// (runs_hierarchically).
template <typename T>
void reduce_hierarchically(const team& t, T* dst, const T* src, std::size_t count, reduce_op op, cudaStream_t stream) {
  const world& w = t.owner();
  const team& node = node_team(w);
  const team& across = same_local_rank_team(w);
  const std::size_t m = static_cast<std::size_t>(node.size()), r = static_cast<std::size_t>(node.my_index());
  const std::size_t q = count / m, rest = count - q * m;
  const node_shape shape{.gpus_per_node = node.size(), .nodes = across.size()};
  const std::size_t chunks = static_cast<std::size_t>(hierarchical_chunks(t, shape, count * sizeof(T), q));
  network_pipeline pipe(t, stream);
  T* gather_next = nullptr;  // the chunk whose all-gather is due, and each PE's share of it
  std::size_t gather_share = 0;
  for (std::size_t j = 0, first = 0; j < chunks; ++j) {
    const std::size_t qj = q / chunks + (j < q % chunks ? 1 : 0);
    T* chunk = dst + m * first;
    T* share = chunk + r * qj;
    reduce_on_stream_impl<true>(node, share, src + m * first, qj, op, stream, {});
    pipe.to_network();
    if (gather_next != nullptr) {
      pipe.from_network();
      fcollect_bytes_on_stream(node, gather_next, gather_next + r * gather_share, gather_share * sizeof(T), stream);
    }
    reduce_on_stream_impl<false>(across, share, share, qj, op, pipe.network_stream(), {});
    gather_next = chunk;
    gather_share = qj;
    first += qj;
  }
  pipe.from_network();
  fcollect_bytes_on_stream(node, gather_next, gather_next + r * gather_share, gather_share * sizeof(T), stream);
  if (rest != 0) reduce_on_stream_impl<false>(t, dst + m * q, src + m * q, rest, op, stream, {});
}

template <bool kScatter, typename T>
void reduce_on_stream_impl(const team& t, T* dst, const T* src, std::size_t count, reduce_op op, cudaStream_t stream,
                           channel_range channels) {
  const char* call = kScatter ? "shoal::reducescatter_on_stream" : "shoal::reduce_on_stream";
  const team_handle h = stream_view(t, channels, call);
  check_reduce_op(op, call);
  if constexpr (!is_reduce_integer_v<T>) check_op_for_floating(op, call);
  const std::size_t bytes = collective_bytes(count, sizeof(T), call);
  const std::size_t src_bytes = kScatter ? team_bytes(bytes, t.size(), call) : bytes;
  check_buffer(t, dst, bytes, call, "dst");
  check_buffer(t, src, src_bytes, call, "src");
  if (kScatter || dst != src) check_no_overlap(dst, bytes, src, src_bytes, call);
  if (count == 0) return;
  if (!kScatter && h.spans_nodes != 0 && runs_hierarchically(t, h, dst, src, count, sizeof(T)))
    return reduce_hierarchically(t, dst, src, count, op, stream);
  const collective coll = kScatter ? collective::reducescatter : collective::reduce;
  const algorithm algo = h.pick(coll, bytes, kScatter ? algorithm::direct : algorithm::two_shot);
  const coll_launch launch = plan_launch(h, algo, bytes, src_bytes);
  const bool copy_engines = reduces_with_copy_engines(t, coll, algo, dst, src, bytes);
  visit_op(op, [&]<reduce_op Op>(op_tag<Op>) {
    if (copy_engines)
      reduce_pair_with_copy_engines(t, h, coll, dst, src, count, sizeof(T), stream, call, &launch_combine<T, Op>);
    else
      launch_reduce<kScatter, T, Op>(t, h, algo, launch, dst, src, count, stream, call);
  });
}

}  // namespace shoal::detail

namespace shoal {

template <typename T>
void reduce_on_stream(const team& t, T* dst, const T* src, std::size_t count, reduce_op op, cudaStream_t stream,
                      channel_range channels) {
  detail::reduce_on_stream_impl<false>(t, dst, src, count, op, stream, channels);
}
template <typename T>
void reducescatter_on_stream(const team& t, T* dst, const T* src, std::size_t count, reduce_op op,
                             cudaStream_t stream, channel_range channels) {
  detail::reduce_on_stream_impl<true>(t, dst, src, count, op, stream, channels);
}

}  // namespace shoal

#define SHOAL_INSTANTIATE_REDUCE_ON_STREAM(T)                                                                  \
  template void reduce_on_stream<T>(const team&, T*, const T*, std::size_t, reduce_op, cudaStream_t,         \
                                    channel_range);                                                           \
  template void reducescatter_on_stream<T>(const team&, T*, const T*, std::size_t, reduce_op, cudaStream_t, \
                                           channel_range);
