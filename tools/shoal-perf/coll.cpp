// `shoal-perf coll`: shoal's collectives on the world team against size, each called four ways (a loop of
// on-stream calls, the same loop under CUDA graph replay, back-to-back calls in one kernel at grid scope
// and at one block), with the cost model's algorithm, bus bandwidth, NCCL's same operation under graph
// replay beside every row and NVSHMEM's on-stream call beside every on-stream row.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>

#include "coll.hpp"
#include "nvshmem_peer.hpp"
#include "suites.hpp"

namespace shoal::perf {

namespace {

const std::vector<std::uint64_t> kDefaultSizes = {4,          16,          64,          256,          1ull << 10,
                                                  4ull << 10, 16ull << 10, 64ull << 10, 256ull << 10, 1ull << 20,
                                                  4ull << 20, 16ull << 20, 64ull << 20, 256ull << 20, 1ull << 30};

std::string title_of(collective op, int n_pes) {
  switch (op) {
    case collective::reduce:
      return fmt::format("reduce (all-reduce), {} sum: bytes = the buffer; busbw = algbw x 2(n-1)/n", kCollElemName);
    case collective::reducescatter:
      return fmt::format(
          "reducescatter, {} sum: bytes = each PE's result block; algbw counts the input ({} x "
          "bytes); busbw = algbw x (n-1)/n",
          kCollElemName, n_pes);
    case collective::fcollect:
      return fmt::format(
          "fcollect (all-gather): bytes = each PE's contribution; algbw counts the output ({} x "
          "bytes); busbw = algbw x (n-1)/n",
          n_pes);
    case collective::alltoall:
      return fmt::format(
          "alltoall: bytes = one block, PE to PE; algbw = bytes moved incl. local ({} x bytes) / "
          "time; busbw = algbw x (n-1)/n",
          n_pes);
    case collective::broadcast:
      return fmt::format("broadcast from PE {}: bytes = the buffer; busbw = algbw", kBroadcastRoot);
    case collective::barrier:
      return "barrier on the world team, per call (no NCCL counterpart)";
  }
  return "?";
}

// NVSHMEM's on-stream call beside an on-stream row (with_nvshmem: a failure becomes a note).
row with_nvshmem_on_stream(context& ctx, row r, const coll_case& c) {
  if (c.mode != coll_mode::stream) return r;
  return with_nvshmem(ctx, std::move(r), [&](nvshmem_peer& peer, row& x) {
    attach_nvshmem_coll(ctx, x, c.op, peer.measure_coll(ctx, c.op, c.bytes, coll_mode::stream));
  });
}

template <typename T>
std::vector<T> chosen_or_all(const std::vector<T>& chosen, std::span<const T> all) {
  std::vector<T> out;
  for (const T& x : all)
    if (chosen.empty() || std::find(chosen.begin(), chosen.end(), x) != chosen.end()) out.push_back(x);
  return out;
}

}  // namespace

void run_coll(context& ctx) {
  reporter& out = *ctx.out;
  const coll_options& settings = coll_settings();
  const std::vector<collective> colls = chosen_or_all<collective>(settings.colls, kCollOrder);
  const std::vector<coll_mode> modes = settings.modes.empty()
                                           ? std::vector<coll_mode>(std::begin(kCollModes), std::end(kCollModes))
                                           : chosen_or_all<coll_mode>(settings.modes, kCollAllModes);
  const bool user_sizes = !ctx.opt.sizes.empty();
  const std::vector<std::uint64_t>& sizes = user_sizes ? ctx.opt.sizes : kDefaultSizes;
  const int n = ctx.n_pes;

  // Every size of every collective must fit the two arenas in the heap; the others are skipped.
  const std::uint64_t room = coll_heap_room(ctx);
  std::uint64_t largest = 1;
  std::vector<std::vector<std::uint64_t>> runnable(colls.size());
  std::vector<std::string> skipped(colls.size());
  for (std::size_t i = 0; i < colls.size(); ++i) {
    if (colls[i] == collective::barrier) continue;
    for (std::uint64_t bytes : sizes) {
      auto skip = [&](const std::string& why) {
        skipped[i] += (skipped[i].empty() ? "" : "; ") + fmt::format("{} skipped: {}", format_bytes(bytes), why);
      };
      const std::uint64_t buffer = coll_buffer_bytes(colls[i], bytes, n);
      if (!coll_size_valid(colls[i], bytes)) {
        skip(fmt::format("not a whole number of {} elements", kCollElemName));
      } else if (const std::uint64_t need = coll_arenas_bytes(ctx, buffer); need > room) {
        skip(
            fmt::format("its two buffers need {:.2f} GiB of symmetric heap, {:.2f} GiB is free (GPU memory or "
                        "SHOAL_HEAP_MAX_SIZE)",
                        double(need) / double(1ull << 30), double(room) / double(1ull << 30)));
      } else {
        runnable[i].push_back(bytes);
        largest = std::max(largest, buffer);
      }
    }
  }
  ctx.reserve(largest);

  const char* model = std::getenv("SHOAL_COLL_MODEL");
  out.note(
      fmt::format("collectives of the world team ({} PEs). launch floor {:.2f} us: no loop of on-stream calls "
                  "(mode stream) can beat it",
                  n, ctx.launch_floor_us));
  out.note(
      "modes: stream = back-to-back on-stream calls timed with events; graph = the same calls captured (one graph "
      "per batch, on that batch's buffers) and replayed; grid / block = N back-to-back calls inside one kernel "
      "(grid: the on-stream CTA count; block: one CTA), timed in the kernel; grid_ll = grid with shoal::ll_only (LL alone in the kernel). Every batch starts "
      "after a barrier on the stream; times are the slowest PE's");
  out.note(fmt::format(
      "algo: the cost model's choice (team_handle::pick; one block on a buffer too large for it runs the large "
      "algorithm), table {}; NCCL: the same operation "
      "under graph replay, x_nccl = shoal algbw / NCCL algbw; NVSHMEM: its on-stream call beside the stream rows, "
      "x_nvs likewise",
      model != nullptr && *model != '\0' ? fmt::format("from SHOAL_COLL_MODEL={}", model) : std::string("built in")));

  for (std::size_t i = 0; i < colls.size(); ++i) {
    const collective op = colls[i];
    out.section(title_of(op, n), false, table_layout::coll);
    if (!skipped[i].empty()) out.note(skipped[i]);
    if (op == collective::barrier) {
      for (coll_mode mode : modes) {
        if (mode == coll_mode::grid_ll) continue;  // the barrier has no ll_only form
        const coll_case c{.op = op, .bytes = 0, .mode = mode, .force = std::nullopt};
        out.add(with_nvshmem_on_stream(ctx, coll_row(ctx, c, measure_coll(ctx, c)), c));
      }
      continue;
    }
    const bool with_nccl = ctx.nccl != nullptr && nccl_peer::has(op);
    bool noted_block_cap = false;
    for (std::uint64_t bytes : runnable[i]) {
      measurement nccl;
      if (with_nccl) nccl = ctx.nccl->measure_collective(ctx, op, bytes);
      for (coll_mode mode : modes) {
        if (mode == coll_mode::block && bytes > kCollBlockMaxBytes && !user_sizes) {
          if (!noted_block_cap)
            out.note(fmt::format("block scope stops at {} by default (one CTA moves it all; --sizes to go further)",
                                 format_bytes(kCollBlockMaxBytes)));
          noted_block_cap = true;
          continue;
        }
        const coll_case c{.op = op, .bytes = bytes, .mode = mode, .force = std::nullopt};
        row r = coll_row(ctx, c, measure_coll(ctx, c));
        if (with_nccl) attach_nccl_coll(ctx, r, op, nccl);
        out.add(with_nvshmem_on_stream(ctx, std::move(r), c));
      }
    }
  }
}

}  // namespace shoal::perf
