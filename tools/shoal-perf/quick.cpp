// `shoal-perf quick`: in about a minute, the headline point-to-point rows of TARGETS.md that shoal has
// today, each beside its target with a pass/miss verdict, NCCL send/recv beside the put rows. Sizes and
// CTA counts are fixed here (--sizes and --ctas do not apply); timing options do.
#include <initializer_list>

#include "suites.hpp"

namespace shoal::perf {

namespace {

constexpr std::uint64_t k64K = 64ull << 10, k1M = 1ull << 20, k256M = 256ull << 20;

row aimed(row r, std::string_view key) {
  r.aim = &find_target(key);
  return r;
}

// The best of a few CTA counts for sizes whose target names none; a failed check wins, so it is seen.
row best_put(context& ctx, std::uint64_t bytes, std::initializer_list<int> ctas) {
  row best;
  bool have = false;
  for (int n : ctas) {
    const rma_case c{.dir = rma_dir::put, .scope = scope_kind::block, .bytes = bytes, .ctas = n, .threads = ctx.opt.threads};
    row r = device_rma_row(ctx, c, measure_device_rma(ctx, c));
    bool better = !have || (best.check != check_result::failed &&
                            (r.check == check_result::failed || r.bandwidth_gbs > best.bandwidth_gbs));
    if (better) best = std::move(r);
    have = true;
  }
  std::string counts;
  for (int n : ctas) {
    if (!counts.empty()) counts += '/';
    counts += std::to_string(n);
  }
  best.note = "best of " + counts + " CTAs";
  return best;
}

}  // namespace

void run_quick(context& ctx) {
  ctx.reserve(k256M);
  reporter& out = *ctx.out;
  measurement nccl_256M, nccl_1M;
  if (ctx.nccl != nullptr) {
    out.note("measuring NCCL send/recv 256M and 1M first (shown beside the put rows)...");
    nccl_256M = ctx.nccl->measure_send_recv(ctx, k256M);
    nccl_1M = ctx.nccl->measure_send_recv(ctx, k1M);
  }
  auto beside = [&](row r, const measurement& nccl) {
    if (ctx.nccl != nullptr) attach_nccl(r, nccl);
    return r;
  };
  auto put = [&](std::uint64_t bytes, int ctas) {
    const rma_case c{.dir = rma_dir::put, .scope = scope_kind::block, .bytes = bytes, .ctas = ctas, .threads = ctx.opt.threads};
    return device_rma_row(ctx, c, measure_device_rma(ctx, c));
  };
  auto get = [&](std::uint64_t bytes, int ctas) {
    const rma_case c{.dir = rma_dir::get, .scope = scope_kind::block, .bytes = bytes, .ctas = ctas, .threads = ctx.opt.threads};
    return device_rma_row(ctx, c, measure_device_rma(ctx, c));
  };
  // Grid scope: one call by the whole grid, the threads interleaved over the message.
  auto grid_rma = [&](rma_dir dir, std::uint64_t bytes, int ctas) {
    const rma_case c{.dir = dir, .scope = scope_kind::grid, .bytes = bytes, .ctas = ctas, .threads = ctx.opt.threads};
    return device_rma_row(ctx, c, measure_device_rma(ctx, c));
  };

  out.section("quick: headline rows of TARGETS.md (PE 0 -> PE 1)", true);
  out.add(aimed(beside(put(k256M, 32), nccl_256M), "put_256M_32"));
  out.add(aimed(beside(put(k256M, 132), nccl_256M), "put_256M_16to132"));
  out.add(aimed(beside(best_put(ctx, k1M, {8, 16, 32, 66}), nccl_1M), "put_1M"));
  out.add(aimed(best_put(ctx, k64K, {4, 8, 16, 32}), "put_64K"));
  for (int n : {16, 32, 132}) out.add(aimed(get(k256M, n), "get_256M"));
  for (int n : {32, 132}) out.add(aimed(beside(grid_rma(rma_dir::put, k256M, n), nccl_256M), "put_256M_16to132"));
  for (int n : {32, 132}) out.add(aimed(grid_rma(rma_dir::get, k256M, n), "get_256M"));
  out.add(aimed(beside(stream_rma_row(ctx, rma_dir::put, k256M, measure_stream_rma(ctx, rma_dir::put, k256M)), nccl_256M),
                "put_on_stream_256M"));

  out.add(aimed(pingpong_row(pingpong_kind::p, scope_kind::thread, 8,
                             measure_pingpong(ctx, pingpong_kind::p, scope_kind::thread, 8)),
                "p_one_way"));
  out.add(aimed(pingpong_row(pingpong_kind::put_signal, scope_kind::thread, 8,
                             measure_pingpong(ctx, pingpong_kind::put_signal, scope_kind::thread, 8)),
                "put_signal_8B_thread"));
  out.add(aimed(pingpong_row(pingpong_kind::put_signal, scope_kind::warp, 4096,
                             measure_pingpong(ctx, pingpong_kind::put_signal, scope_kind::warp, 4096)),
                "put_signal_4K_warp"));
  out.add(aimed(fetch_add_row(measure_fetch_add(ctx)), "fetch_add_round_trip"));
  out.add(aimed(barrier_row(true, measure_barrier_on_stream(ctx)), "barrier_on_stream"));
  out.add(aimed(barrier_row(false, measure_barrier_in_kernel(ctx)), "barrier_in_kernel"));

  // The launch floor of this run (measured at start), for reading on-stream figures against it.
  row floor;
  floor.op = "launch_floor";
  floor.scope = "stream";
  floor.algo = "empty_kernel";
  floor.metric = "latency";
  floor.what = "per empty kernel launch";
  floor.from_pe = floor.to_pe = -1;
  floor.t.median_us = ctx.launch_floor_us;
  floor.note = "reference machine: 3.8-5.0 us";
  out.add(floor);
}

}  // namespace shoal::perf
