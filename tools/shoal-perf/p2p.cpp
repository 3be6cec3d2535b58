// `shoal-perf p2p`: point-to-point RMA from PE 0 to PE 1. Put and get bandwidth over sizes and CTA counts
// (block scope), one warp and one thread for small sizes, the stream-ordered (copy engine) forms, then
// latencies: p and put_signal ping-pong, fetch_add round trip, barriers. NCCL send/recv beside every put.
#include <algorithm>
#include <exception>
#include <map>

#include "suites.hpp"

namespace shoal::perf {

namespace {

const std::vector<std::uint64_t> kDefaultSizes = {8,        64,        512,       4ull << 10, 64ull << 10,
                                                  1ull << 20, 16ull << 20, 256ull << 20, 1ull << 30};
const std::vector<int> kDefaultCtas = {1, 2, 4, 8, 16, 32, 66, 132};
const std::vector<std::uint64_t> kSignalSizes = {8, 64, 512, 4ull << 10, 64ull << 10};
constexpr std::uint64_t kSmallScopeMax = 64ull << 10;  // warp and thread scope rows stop here

row base_row(std::string op, std::string scope, std::string algo, std::string metric, const measurement& m) {
  row r;
  r.suite = "p2p";
  r.op = std::move(op);
  r.scope = std::move(scope);
  r.algo = std::move(algo);
  r.metric = std::move(metric);
  r.ops = m.ops;
  r.t = m.t;
  r.check = m.check;
  r.note = m.note;
  return r;
}

}  // namespace

double gbs(std::uint64_t bytes, double us) { return static_cast<double>(bytes) / us / 1e3; }

row device_rma_row(const context& ctx, const rma_case& c, const measurement& m) {
  row r = base_row(to_string(c.dir), to_string(c.scope), "sm_copy", "bandwidth", m);
  r.what = "per message";
  r.from_pe = c.dir == rma_dir::put ? 0 : 1;
  r.to_pe = c.dir == rma_dir::put ? 1 : 0;
  r.bytes = c.bytes;
  r.ctas = c.ctas;
  r.threads = c.threads;
  r.bandwidth_gbs = gbs(c.bytes, m.t.median_us);
  r.ceiling_gbs = ctx.opt.nvlink_ceiling_gbs;
  return r;
}

row stream_rma_row(const context& ctx, rma_dir dir, std::uint64_t bytes, const measurement& m) {
  row r = base_row(dir == rma_dir::put ? "put_on_stream" : "get_on_stream", "stream", "copy_engine", "bandwidth", m);
  r.what = "per call";
  r.from_pe = dir == rma_dir::put ? 0 : 1;
  r.to_pe = dir == rma_dir::put ? 1 : 0;
  r.bytes = bytes;
  r.bandwidth_gbs = gbs(bytes, m.t.median_us);
  r.ceiling_gbs = ctx.opt.nvlink_ceiling_gbs;
  return r;
}

namespace {
peer_figure peer_of(const row& r, const measurement& m) {
  const double bandwidth = r.metric == "bandwidth" ? gbs(r.bytes, m.t.median_us) : kNaN;
  return {.time_us = m.t.median_us, .bandwidth_gbs = bandwidth, .check = m.check};
}
}  // namespace

void attach_nccl(row& r, const measurement& nccl) { r.nccl = peer_of(r, nccl); }
void attach_nvshmem(row& r, const measurement& nvshmem) { r.nvshmem = peer_of(r, nvshmem); }

row with_nvshmem(context& ctx, row r, const std::function<void(nvshmem_peer&, row&)>& attach) {
  if (ctx.nvshmem == nullptr) return r;
  try {
    attach(*ctx.nvshmem, r);
  } catch (const std::exception& e) {
    r.note += (r.note.empty() ? "NVSHMEM: " : "; NVSHMEM: ") + std::string(e.what());
  }
  return r;
}

row with_nvshmem_rma(context& ctx, row r) {
  return with_nvshmem(ctx, std::move(r), [&](nvshmem_peer& peer, row& x) {
    const rma_case c{.dir = x.op == "get" ? rma_dir::get : rma_dir::put,
                     .scope = scope_kind::block,
                     .bytes = x.bytes,
                     .ctas = x.ctas,
                     .threads = x.threads};
    attach_nvshmem(x, peer.measure_device_rma(ctx, c));
  });
}

measurement one_way(const measurement& round_trip) {
  measurement m = round_trip;
  m.t.median_us /= 2;
  m.t.p10_us /= 2;
  m.t.p90_us /= 2;
  return m;
}

row pingpong_row(pingpong_kind kind, scope_kind scope, std::uint64_t bytes, const measurement& m) {
  const bool p = kind == pingpong_kind::p;
  row r = base_row(p ? "p_pingpong" : "put_signal_pingpong", to_string(scope), p ? "st_volatile" : "sm_copy+signal",
                   "latency", one_way(m));
  r.what = "one-way = round trip / 2";
  r.bytes = p ? 8 : bytes;
  r.ctas = 1;
  r.threads = scope == scope_kind::warp ? 32 : 1;
  return r;
}

row fetch_add_row(const measurement& m) {
  row r = base_row("atomic_fetch_add", "thread", "remote_atomic", "latency", m);
  r.what = "round trip";
  r.bytes = 8;
  r.ctas = 1;
  r.threads = 1;
  return r;
}

// Both barriers meet on flags in one warp: the device's barrier_all at block scope (a CTA of 32 threads), and
// on a stream a one-warp kernel of its own (perf notes 36).
row barrier_row(bool on_stream, const measurement& m) {
  row r = base_row(on_stream ? "barrier_all_on_stream" : "barrier_all", on_stream ? "stream" : "block", "flags",
                   "latency", m);
  r.what = "per barrier";
  r.from_pe = r.to_pe = -1;
  r.ctas = 1;
  r.threads = 32;
  return r;
}

namespace {
// The stream operations: a signal add is a one-thread kernel on the stream, a set a stream write (a kernel
// when captured in a graph, as in the note's graph replay figure), a wait (cmp::ge) a stream wait.
row signal_op_row(shoal::sig_op op, const measurement& m) {
  const bool add = op == shoal::sig_op::add;
  row r = base_row("signal_op_on_stream", "stream", add ? "kernel" : "stream_write", "latency", m);
  r.what = add ? "per call (sig_op::add), each PE into the next"
               : "per call (sig_op::set), each PE into the next; captured: a kernel";
  r.bytes = 8;
  r.from_pe = r.to_pe = -1;
  if (add) {
    r.ctas = 1;
    r.threads = 1;
  }
  return r;
}

row signal_wait_row(const measurement& m) {
  row r = base_row("signal_wait_until_on_stream", "stream", "stream_wait", "latency", m);
  r.what = "per call: an add into the next PE, then a wait (cmp::ge) for the previous PE's";
  r.bytes = 8;
  r.from_pe = r.to_pe = -1;
  return r;
}

// NVSHMEM's figure from `measure`, as the row's (a latency row).
row with_nvshmem_latency(context& ctx, row r, const std::function<measurement(nvshmem_peer&)>& measure) {
  return with_nvshmem(ctx, std::move(r), [&](nvshmem_peer& peer, row& x) { attach_nvshmem(x, measure(peer)); });
}
}  // namespace

row measured_pingpong_row(context& ctx, pingpong_kind kind, scope_kind scope, std::uint64_t bytes) {
  return with_nvshmem_latency(ctx, pingpong_row(kind, scope, bytes, measure_pingpong(ctx, kind, scope, bytes)),
                              [&](nvshmem_peer& n) { return one_way(n.measure_pingpong(ctx, kind, scope, bytes)); });
}

row measured_fetch_add_row(context& ctx) {
  return with_nvshmem_latency(ctx, fetch_add_row(measure_fetch_add(ctx)),
                              [&](nvshmem_peer& n) { return n.measure_fetch_add(ctx); });
}

row measured_barrier_row(context& ctx, bool on_stream) {
  if (on_stream)
    return with_nvshmem_latency(ctx, barrier_row(true, measure_barrier_on_stream(ctx)),
                                [&](nvshmem_peer& n) { return n.measure_barrier_on_stream(ctx); });
  return with_nvshmem_latency(ctx, barrier_row(false, measure_barrier_in_kernel(ctx)),
                              [&](nvshmem_peer& n) { return n.measure_barrier_in_kernel(ctx); });
}

void run_p2p(context& ctx) {
  const std::vector<std::uint64_t>& sizes = ctx.opt.sizes.empty() ? kDefaultSizes : ctx.opt.sizes;
  const std::vector<int>& ctas = ctx.opt.ctas.empty() ? kDefaultCtas : ctx.opt.ctas;
  ctx.reserve(*std::max_element(sizes.begin(), sizes.end()));
  reporter& out = *ctx.out;

  std::map<std::uint64_t, measurement> nccl;
  if (ctx.nccl != nullptr) {
    out.note("measuring NCCL send/recv for every size first (shown beside the put rows)...");
    for (std::uint64_t bytes : sizes) nccl[bytes] = ctx.nccl->measure_send_recv(ctx, bytes);
  }
  auto with_nccl = [&](row r) {
    if (auto it = nccl.find(r.bytes); it != nccl.end()) attach_nccl(r, it->second);
    return r;
  };

  for (rma_dir dir : {rma_dir::put, rma_dir::get}) {
    out.section(dir == rma_dir::put ? "put bandwidth, block scope, PE 0 -> PE 1 (NCCL send/recv beside)"
                                    : "get bandwidth, block scope, PE 0 reads PE 1");
    for (std::uint64_t bytes : sizes) {
      for (int n : ctas) {
        const rma_case c{.dir = dir, .scope = scope_kind::block, .bytes = bytes, .ctas = n, .threads = ctx.opt.threads};
        row r = with_nvshmem_rma(ctx, device_rma_row(ctx, c, measure_device_rma(ctx, c)));
        out.add(dir == rma_dir::put ? with_nccl(std::move(r)) : std::move(r));
      }
    }
  }

  for (rma_dir dir : {rma_dir::put, rma_dir::get}) {
    out.section(dir == rma_dir::put ? "put bandwidth, grid scope (one call by the whole grid), PE 0 -> PE 1"
                                    : "get bandwidth, grid scope, PE 0 reads PE 1");
    for (std::uint64_t bytes : sizes) {
      if (bytes < (1u << 20)) continue;  // grid scope is for bulk transfers
      for (int n : ctas) {
        const rma_case c{.dir = dir, .scope = scope_kind::grid, .bytes = bytes, .ctas = n, .threads = ctx.opt.threads};
        row r = device_rma_row(ctx, c, measure_device_rma(ctx, c));
        out.add(dir == rma_dir::put ? with_nccl(std::move(r)) : std::move(r));
      }
    }
  }

  out.section("put / get by one warp and by one thread, small sizes");
  for (rma_dir dir : {rma_dir::put, rma_dir::get}) {
    for (scope_kind scope : {scope_kind::warp, scope_kind::thread}) {
      for (std::uint64_t bytes : sizes) {
        if (bytes > kSmallScopeMax) continue;
        const rma_case c{.dir = dir, .scope = scope, .bytes = bytes, .ctas = 1, .threads = scope == scope_kind::warp ? 32 : 1};
        out.add(device_rma_row(ctx, c, measure_device_rma(ctx, c)));
      }
    }
  }

  out.section("put_on_stream / get_on_stream (copy engine), PE 0 -> PE 1 and back (NCCL beside put)");
  for (rma_dir dir : {rma_dir::put, rma_dir::get}) {
    for (std::uint64_t bytes : sizes) {
      row r = stream_rma_row(ctx, dir, bytes, measure_stream_rma(ctx, dir, bytes));
      out.add(dir == rma_dir::put ? with_nccl(std::move(r)) : std::move(r));
    }
  }

  out.section("latency: ping-pong PE 0 <-> PE 1 (one-way), fetch_add round trip, barriers");
  out.add(measured_pingpong_row(ctx, pingpong_kind::p, scope_kind::thread, 8));
  std::vector<std::uint64_t> signal_sizes;
  for (std::uint64_t bytes : ctx.opt.sizes.empty() ? kSignalSizes : ctx.opt.sizes)
    if (bytes <= kSmallScopeMax) signal_sizes.push_back(bytes);
  for (scope_kind scope : {scope_kind::thread, scope_kind::warp})
    for (std::uint64_t bytes : signal_sizes)
      out.add(measured_pingpong_row(ctx, pingpong_kind::put_signal, scope, bytes));
  out.add(measured_fetch_add_row(ctx));
  out.add(measured_barrier_row(ctx, true));
  out.add(measured_barrier_row(ctx, false));
  out.add(signal_op_row(shoal::sig_op::add, measure_signal_op_on_stream(ctx, shoal::sig_op::add)));
  out.add(signal_op_row(shoal::sig_op::set, measure_signal_op_on_stream(ctx, shoal::sig_op::set)));
  out.add(signal_wait_row(measure_signal_wait_on_stream(ctx)));
}

}  // namespace shoal::perf
