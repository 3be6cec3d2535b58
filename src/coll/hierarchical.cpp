#include "coll/hierarchical.hpp"

#include <cstdlib>
#include <string_view>

#include "coll/cost_model.hpp"
#include "coll/tuning.hpp"
#include "shoal/world.hpp"

namespace shoal::detail {

double flat_reduce_us(const coll_model_table& table, node_shape shape, std::size_t bytes) {
  return table.launch_us + net_model_detail::flat_us(table, collective::reduce, algorithm::one_shot, shape, bytes);
}

double hierarchical_reduce_us(const coll_model_table& table, node_shape shape, std::size_t bytes) {
  namespace d = net_model_detail;
  const int m = shape.gpus_per_node;
  const std::uint64_t share = (bytes + m - 1) / m;
  return 3 * table.launch_us + d::node_phase_us(table, collective::reducescatter, m, share) +
         d::flat_us(table, collective::reduce, algorithm::one_shot, node_shape{.gpus_per_node = 1, .nodes = shape.nodes},
                    share) +
         d::node_phase_us(table, collective::fcollect, m, share);
}

bool runs_hierarchically(const team& t, channel_range channels, const void* dst, const void* src, std::size_t count,
                         std::size_t element_bytes) {
  const world& w = t.owner();
  if (&t != &world_team(w) || t.device_handle().spans_nodes == 0) return false;
  const int m = node_team(w).size(), nodes = same_local_rank_team(w).size();
  if (m < 2 || nodes < 2 || m * nodes != t.size()) return false;  // irregular nodes: no same-local-rank team
  if (channels.first != 0 || channels.count != 0) return false;
  const std::size_t bytes = count * element_bytes;
  const auto* d = static_cast<const std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  if (count < static_cast<std::size_t>(m) || (d < s + bytes && s < d + bytes)) return false;
  const std::string_view forced = forced_algorithm(collective::reduce, [](const char* name) { return std::getenv(name); });
  if (!forced.empty()) return names_host_composition(collective::reduce, forced);
  const node_shape shape{.gpus_per_node = m, .nodes = nodes};
  const coll_model_table& table = active_coll_model();
  return hierarchical_reduce_us(table, shape, bytes) < flat_reduce_us(table, shape, bytes);
}

}  // namespace shoal::detail
