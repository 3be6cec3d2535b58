#include "coll/hierarchical.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "base/config.hpp"
#include "coll/cost_model.hpp"
#include "coll/tuning.hpp"
#include "host/cuda_check.hpp"
#include "host/world_impl.hpp"
#include "shoal/error.hpp"
#include "shoal/world.hpp"

namespace shoal::detail {

double flat_reduce_us(const coll_model_table& table, node_shape shape, std::size_t bytes) {
  return table.launch_us + net_model_detail::flat_us(table, collective::reduce, algorithm::one_shot, shape, bytes);
}

hierarchical_plan plan_hierarchical_reduce(const coll_model_table& table, node_shape shape, std::size_t bytes) {
  namespace d = net_model_detail;
  const int m = shape.gpus_per_node;
  const node_shape across{.gpus_per_node = 1, .nodes = shape.nodes};
  hierarchical_plan best{.chunks = 1, .us = std::numeric_limits<double>::infinity()};
  for (int chunks = 1; chunks <= kMaxHierarchicalChunks; chunks *= 2) {
    const std::uint64_t per = static_cast<std::uint64_t>(chunks) * m;
    const std::uint64_t share = (bytes + per - 1) / per;  // each PE's share of one chunk
    const double node_us = 2 * table.launch_us + d::node_phase_us(table, collective::reducescatter, m, share) +
                           d::node_phase_us(table, collective::fcollect, m, share);
    const double network_us =
        table.launch_us + d::flat_us(table, collective::reduce, algorithm::one_shot, across, share);
    const double us = node_us + network_us + (chunks - 1) * std::max(node_us, network_us);
    if (us < best.us) best = {.chunks = chunks, .us = us};
  }
  return best;
}

int hierarchical_chunks(const coll_model_table& table, node_shape shape, std::size_t bytes, std::size_t share_count,
                        std::int64_t forced) {
  if (forced < 0 || forced > kMaxHierarchicalChunks)
    throw error(
        errc::config, "SHOAL_HIERARCHICAL_CHUNKS",
        fmt::format("{} is out of range: expected 0..{} (0: the model's choice)", forced, kMaxHierarchicalChunks));
  const int chunks = forced != 0 ? static_cast<int>(forced) : plan_hierarchical_reduce(table, shape, bytes).chunks;
  return static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(chunks), std::max<std::size_t>(share_count, 1)));
}

int hierarchical_chunks(const team& t, node_shape shape, std::size_t bytes, std::size_t share_count) {
  return hierarchical_chunks(active_coll_model(), shape, bytes, share_count, t.internals().cfg.hierarchical_chunks);
}

bool runs_hierarchically(const team& t, const team_handle& view, const void* dst, const void* src, std::size_t count,
                         std::size_t element_bytes) {
  const world& w = t.owner();
  if (&t != &world_team(w) || view.spans_nodes == 0) return false;
  const int m = node_team(w).size(), nodes = same_local_rank_team(w).size();
  if (m < 2 || nodes < 2 || m * nodes != t.size()) return false;  // irregular nodes: no same-local-rank team
  // All of the team's channels, however the caller named them ({} or {0, count}): every PE must decide alike.
  if (view.channel_first != 0 || view.channel_count != view.channel_total) return false;
  const std::size_t bytes = count * element_bytes;
  const auto* d = static_cast<const std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  if (count < static_cast<std::size_t>(m) || (d < s + bytes && s < d + bytes)) return false;
  // The overrides as the team read them at creation (the members agreed on them there).
  const bool forced_hierarchical = t.hierarchical_reduce_forced();
  if (view.tuning.forced[static_cast<int>(collective::reduce)] >= 0) return false;
  // Its two streams' waiting work and the proxy's stream need a queue each (host/work_queues.hpp), on every PE:
  // judged from the fewest any PE has (agreed at init), so that no PE runs hierarchically while another runs flat.
  const world::impl& wi = w.internals();
  if (wi.fewest_work_queues < kHierarchicalWorkQueues) {
    if (!forced_hierarchical) return false;
    const std::string whose =
        wi.fewest_work_queues_pe == w.pe()
            ? fmt::format("this process (PE {}) has {} ({})", w.pe(), wi.work_queues.count, wi.work_queues.source)
            : fmt::format("PE {} has {}", wi.fewest_work_queues_pe, wi.fewest_work_queues);
    throw error(
        errc::unsupported, "shoal::reduce_on_stream",
        fmt::format(
            "SHOAL_ALGO_REDUCE=hierarchical: the hierarchical all-reduce needs {} hardware work queues on every "
            "PE and {}, so its kernels would wait for the proxy forever; set "
            "CUDA_DEVICE_MAX_CONNECTIONS to at least {} on every PE, as shoal::init advises across "
            "nodes (one more for a stream of yours that waits; docs/proxy-design.md, \"Hardware work "
            "queues\")",
            kHierarchicalWorkQueues, whose, kHierarchicalWorkQueues + 1));
  }
  if (forced_hierarchical) return true;
  const node_shape shape{.gpus_per_node = m, .nodes = nodes};
  const coll_model_table& table = active_coll_model();
  return plan_hierarchical_reduce(table, shape, bytes).us < flat_reduce_us(table, shape, bytes);
}

network_pipeline::network_pipeline(const team& t, cudaStream_t node_stream)
    : lock_(t.internals().network_mutex), node_(node_stream) {
  forked_stream& network = t.internals().network;
  network.ensure();
  network_ = network.stream;
  node_done_ = network.fork;
  network_done_ = network.join;
}

void network_pipeline::to_network() {
  SHOAL_CUDA_CHECK(cudaEventRecord(node_done_, node_));
  SHOAL_CUDA_CHECK(cudaStreamWaitEvent(network_, node_done_, 0));
}

void network_pipeline::from_network() {
  SHOAL_CUDA_CHECK(cudaEventRecord(network_done_, network_));
  SHOAL_CUDA_CHECK(cudaStreamWaitEvent(node_, network_done_, 0));
}

}  // namespace shoal::detail
