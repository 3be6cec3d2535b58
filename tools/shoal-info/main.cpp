// shoal-info: what shoal sees on this machine. Version, GPUs and their links, which transport would serve
// each pair of GPUs, and every SHOAL_* variable with its value, default and meaning. Runs anywhere,
// including machines without a GPU or driver; exits 1 when a SHOAL_* variable holds a bad value.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "coll/tuning.hpp"
#include "host/work_queues.hpp"
#include "shoal/error.hpp"
#include "shoal/version.hpp"
#include "transport/network.hpp"
#include "transport/topology.hpp"

namespace {

using shoal::detail::config_table;
using shoal::detail::config_var;
using shoal::detail::topology;
using shoal::detail::transport_kind;

// One row of the configuration as this process sees it.
struct config_row {
  const config_var* var;
  std::optional<std::string> env;  // the environment's text, if set and not empty
  std::string value() const { return env ? *env : var->default_value; }
  bool is_default() const { return !env || *env == var->default_value; }
};

std::vector<config_row> current_config() {
  std::vector<config_row> rows;
  for (const config_var& var : config_table()) {
    const char* set = std::getenv(var.name);
    rows.push_back(config_row{&var, set != nullptr && *set != '\0' ? std::optional<std::string>(set) : std::nullopt});
  }
  return rows;
}

std::string version_line() {
  std::string commit(shoal::git_commit());
  return commit.empty() ? fmt::format("shoal {}", shoal::version())
                        : fmt::format("shoal {} ({})", shoal::version(), commit);
}

std::string gib(std::uint64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

std::string shown(std::string_view text) { return text.empty() ? std::string("(empty)") : std::string(text); }

bool emulating_nodes(const std::vector<config_row>& config) {
  for (const config_row& row : config)
    if (std::string_view(row.var->name) == "SHOAL_EMULATE_NODES") return row.value() != "1";
  return false;
}

// A square table with GPU numbers on both axes; cell(i, j) gives the text.
template <typename Cell>
void print_matrix(size_t n, Cell cell) {
  size_t width = 6;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) width = std::max(width, cell(i, j).size() + 2);
  fmt::print("  {:<6}", "");
  for (size_t j = 0; j < n; ++j) fmt::print("{:<{}}", fmt::format("GPU{}", j), width);
  fmt::print("\n");
  for (size_t i = 0; i < n; ++i) {
    fmt::print("  {:<6}", fmt::format("GPU{}", i));
    for (size_t j = 0; j < n; ++j) fmt::print("{:<{}}", cell(i, j), width);
    fmt::print("\n");
  }
}

void print_topology(const topology& topo, const std::string& topo_error, bool emulated) {
  if (!topo_error.empty()) {
    fmt::print("GPUs: query failed: {}\n\n", topo_error);
    return;
  }
  if (topo.gpus.empty()) {
    fmt::print("GPUs: none (no GPU: {})\n\n", topo.no_gpu_reason);
    fmt::print(
        "Transports: none here. A PE needs a GPU (shoal::init says so); only a host-only world "
        "(init_options{{.device = shoal::kNoDevice}}) starts without one.\n\n");
    return;
  }
  fmt::print("GPUs ({})\n", topo.gpus.size());
  for (const auto& g : topo.gpus)
    fmt::print("  GPU{:<3} {}  {}  {} SMs  {}  compute {}.{}\n", g.device, g.name, g.pci_bus_id, g.sm_count,
               gib(g.memory_bytes), g.cc_major, g.cc_minor);
  fmt::print("\n");
  const size_t n = topo.gpus.size();
  if (n > 1) {
    fmt::print("Links (row GPU reaching column GPU's memory; NVLink counts from NVML: {})\n", topo.nvml_status);
    print_matrix(n, [&](size_t i, size_t j) { return shoal::detail::link_label(topo.links[i * n + j]); });
    fmt::print(
        "  NV<k> = peer access over k NVLinks, PCIe-P2P = peer access over PCIe, P2P = peer access over an\n"
        "  unknown link (no NVML), none = no peer access.\n");
    for (const auto& l : topo.links)
      if (l.from != l.to && l.peer_access)
        fmt::print("  GPU{} -> GPU{}: performance rank {}, native atomics {}\n", l.from, l.to, l.performance_rank,
                   l.native_atomics ? "yes" : "no");
    fmt::print("\n");
  }
  fmt::print("Transports (a PE on the row GPU reaching a PE on the column GPU, same node)\n");
  print_matrix(n, [&](size_t i, size_t j) {
    return std::string(shoal::detail::to_string(
        shoal::detail::select_transport({"", static_cast<int>(i)}, {"", static_cast<int>(j)}, topo)));
  });
  fmt::print("  p2p:   {}\n", shoal::detail::describe(transport_kind::p2p));
  fmt::print("  proxy: {}\n", shoal::detail::describe(transport_kind::proxy));
  fmt::print("  PEs on different nodes always use the proxy{}.\n\n",
             emulated ? " (SHOAL_EMULATE_NODES is set: PEs of different emulated nodes count as different nodes)" : "");
}

void print_config(const std::vector<config_row>& config) {
  fmt::print("Configuration (* = set in the environment to a value other than the default)\n");
  size_t name_width = 0, value_width = 0;
  for (const auto& row : config) {
    name_width = std::max(name_width, std::string_view(row.var->name).size());
    value_width = std::max(value_width, shown(row.value()).size());
  }
  for (const auto& row : config) {
    fmt::print("{} {:<{}} = {:<{}}  default {}, {} {}\n", row.is_default() ? ' ' : '*', row.var->name, name_width,
               shown(row.value()), value_width, shown(row.var->default_value), to_string(row.var->kind),
               row.var->accepts);
    fmt::print("      {}\n", row.var->description);
  }
}

std::string markdown_cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string code_or_empty(std::string_view text) {
  return text.empty() ? std::string("*(empty)*") : fmt::format("`{}`", markdown_cell(text));
}

// The whole of docs/configuration.md. Depends on the table only, never on this process's environment.
void print_markdown() {
  fmt::print(
      "# Configuration\n"
      "\n"
      "<!-- Generated by `shoal-info --env --markdown` from src/base/config_table.def; edit the table, not this\n"
      "     file. A test fails when the two differ. -->\n"
      "\n"
      "shoal reads its settings from `SHOAL_*` environment variables, all listed below. Each process checks\n"
      "all of them when it starts (`shoal::init`): a value the table does not accept is an error that names the\n"
      "variable and says what it accepts. An unset or empty variable takes its default. A `SHOAL_*` name that\n"
      "is not in the table but a few letters from one that is (`SHOAL_HEAP_SIZ`) draws a warning naming the one\n"
      "it may mean; nothing reads it. `shoal-info --env` prints the values a process would see, marking those\n"
      "that differ from the default.\n"
      "\n"
      "Value formats by kind:\n"
      "\n"
      "- **integer**: a whole number within the range shown.\n"
      "- **bytes**: a whole number with an optional binary suffix: `4096`, `64K`, `2M`, `1G`, `1T` (`KiB`, `MiB`, "
      "... and\n"
      "  any case also work).\n"
      "- **seconds**: a decimal number of seconds or a number with a unit: `30`, `2.5`, `2s`, `500ms`, `250us`, `5m`.\n"
      "- **boolean**: `1`, `0`, `true`, `false`, `yes`, `no`, `on`, `off`.\n"
      "- **choice**: one of the words listed; **list**: a comma-separated list of them.\n"
      "- **string**: free text.\n"
      "\n"
      "| Variable | Kind | Default | Accepts | Description |\n"
      "|---|---|---|---|---|\n");
  for (const config_var& var : config_table())
    fmt::print("| `{}` | {} | {} | {} | {} |\n", var.name, to_string(var.kind), code_or_empty(var.default_value),
               markdown_cell(var.accepts), markdown_cell(var.description));
}

// The hardware work queues this process's streams get on its first GPU; none without a GPU.
std::optional<shoal::detail::work_queue_count> work_queues_here(const topology& topo) {
  if (topo.gpus.empty()) return std::nullopt;
  return shoal::detail::work_queues_of_process(topo.gpus.front().device);
}

void print_work_queues(const topology& topo) {
  const auto queues = work_queues_here(topo);
  if (!queues) return;
  fmt::print(
      "Hardware work queues for CUDA streams: {} ({}). Across nodes the proxy needs one to itself while kernels\n"
      "  wait for other nodes, and the hierarchical all-reduce needs {} (docs/proxy-design.md, \"Hardware work "
      "queues\").\n\n",
      queues->count, queues->source, shoal::detail::kHierarchicalWorkQueues);
}

nlohmann::json to_json(const topology& topo, const std::string& topo_error, const std::vector<config_row>& config,
                       const std::string& config_error) {
  nlohmann::json out;
  out["version"] = std::string(shoal::version());
  out["git_commit"] = std::string(shoal::git_commit());
  out["gpus"] = nlohmann::json::array();
  for (const auto& g : topo.gpus)
    out["gpus"].push_back({{"device", g.device},
                           {"name", g.name},
                           {"pci_bus_id", g.pci_bus_id},
                           {"sm_count", g.sm_count},
                           {"memory_bytes", g.memory_bytes},
                           {"compute_capability", fmt::format("{}.{}", g.cc_major, g.cc_minor)}});
  out["no_gpu_reason"] = topo.gpus.empty() ? nlohmann::json(topo_error.empty() ? topo.no_gpu_reason : topo_error)
                                           : nlohmann::json(nullptr);
  out["nvml"] = topo.nvml_status;
  out["links"] = nlohmann::json::array();
  out["transports"] = nlohmann::json::array();
  for (const auto& l : topo.links) {
    if (l.from == l.to) continue;
    out["links"].push_back({{"from", l.from},
                            {"to", l.to},
                            {"label", shoal::detail::link_label(l)},
                            {"peer_access", l.peer_access},
                            {"performance_rank", l.performance_rank},
                            {"native_atomics", l.native_atomics},
                            {"nvlinks", l.nvlinks}});
    out["transports"].push_back(
        {{"from", l.from},
         {"to", l.to},
         {"transport", std::string(shoal::detail::to_string(shoal::detail::select_transport(true, l.peer_access)))}});
  }
  out["network"] = shoal::detail::describe_ucx_network();
  const auto queues = work_queues_here(topo);
  out["work_queues"] =
      queues ? nlohmann::json{{"count", queues->count}, {"source", queues->source}} : nlohmann::json(nullptr);
  out["config"] = nlohmann::json::array();
  for (const auto& row : config)
    out["config"].push_back({{"name", row.var->name},
                             {"kind", to_string(row.var->kind)},
                             {"value", row.value()},
                             {"default", row.var->default_value},
                             {"is_default", row.is_default()},
                             {"accepts", row.var->accepts},
                             {"description", row.var->description}});
  out["config_error"] = config_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(config_error);
  return out;
}

// The cost model's choice per collective and size for a team of n_pes (SHOAL_ALGO_* and SHOAL_COLL_MODEL
// applied), with the predicted time inside a kernel. Sizes follow coll_cost_terms: broadcast and reduce
// the buffer, fcollect a member's contribution, alltoall one block, reducescatter a member's result.
void print_coll_choices(int n_pes) {
  const shoal::coll_model_table& table = shoal::detail::active_coll_model();
  auto getenv_fn = [](const char* name) { return std::getenv(name); };
  fmt::print("Collective algorithms on a team of {} PEs (cost model{}; predicted us inside a kernel, add {} us "
             "on a stream)\n",
             n_pes, shoal::detail::process_config().coll_model.empty() ? ", built-in table" : ", SHOAL_COLL_MODEL",
             table.launch_us);
  constexpr shoal::collective kShown[] = {shoal::collective::reduce, shoal::collective::reducescatter,
                                          shoal::collective::fcollect, shoal::collective::alltoall,
                                          shoal::collective::broadcast};
  fmt::print("  {:>10}", "bytes");
  for (auto c : kShown) fmt::print("  {:>22}", to_string(c));
  fmt::print("\n");
  for (std::uint64_t bytes = 8; bytes <= (std::uint64_t{1} << 30); bytes *= 8) {
    fmt::print("  {:>10}", bytes);
    for (auto c : kShown) {
      const shoal::algorithm a = shoal::detail::choose_algorithm(table, c, n_pes, bytes, getenv_fn);
      fmt::print("  {:>12} {:>7.1f} us", to_string(a), shoal::predict_us(table, c, a, n_pes, bytes));
    }
    fmt::print("\n");
  }
}

// The scale model's predictions across nodes (shoal/coll_model.hpp: predict_net) as the Markdown tables of
// docs/scale-model.md: all-reduce and alltoall on 1, 2, 16 and 128 nodes (and the table's own node count),
// with the NIC driven through the proxy and from the GPU. SHOAL_COLL_MODEL applies.
void print_scale_model() {
  const shoal::coll_model_table& proxy = shoal::detail::active_coll_model();
  const shoal::coll_model_table gpu = shoal::gpu_initiated_network(proxy);
  const int m = proxy.gpus_per_node;
  std::vector<int> node_counts{1, 2, 16, 128};
  if (std::find(node_counts.begin(), node_counts.end(), proxy.nodes) == node_counts.end()) {
    node_counts.push_back(proxy.nodes);
    std::sort(node_counts.begin(), node_counts.end());
  }
  constexpr std::uint64_t kSizes[] = {8, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30};
  auto size_name = [](std::uint64_t b) {
    return b >= (1u << 30)   ? fmt::format("{} GiB", b >> 30)
           : b >= (1u << 20) ? fmt::format("{} MiB", b >> 20)
           : b >= (1u << 10) ? fmt::format("{} KiB", b >> 10)
                             : fmt::format("{} B", b);
  };
  auto algo_name = [](const shoal::net_prediction& p) {
    if (p.algo != shoal::algorithm::hierarchical) return std::string(to_string(p.algo));
    const std::string between = p.between == shoal::net_algorithm::recursive_doubling ? "/rd"
                                : p.between == shoal::net_algorithm::halving_doubling ? "/hd"
                                : p.between == shoal::net_algorithm::ring             ? "/ring"
                                                                                      : "";
    return fmt::format("hier{} x{}", between, p.chunks);
  };
  // One cell: on-stream time (inside a kernel: launch_us less), nccl-tests bus bandwidth on a stream, algorithm.
  auto cell = [&](const shoal::coll_model_table& table, const shoal::net_prediction& p, shoal::collective op, int n,
                  std::uint64_t bytes) {
    const double us = p.us + table.launch_us;
    return fmt::format("{:.1f} us, {:.1f} GB/s, {}", us, shoal::bus_gbps(op, n, bytes, us), algo_name(p));
  };
  auto header = [&] {
    fmt::print("| size |");
    for (int k : node_counts) fmt::print(" {} node{} ({} GPUs) |", k, k == 1 ? "" : "s", k * m);
    fmt::print("\n|---|");
    for (size_t i = 0; i < node_counts.size(); ++i) fmt::print("---|");
    fmt::print("\n");
  };

  fmt::print(
      "<!-- Generated by `shoal-info --scale-model` ({}): predictions of the cost model, not measurements. -->\n\n",
      version_line());
  fmt::print(
      "Table: {} GPUs a node; NVLink {} GB/s, step {} us; NIC {} GB/s a GPU, network step {} us wire + {} us issue "
      "through the proxy ({} from the GPU), {} us a message through the proxy ({} from the GPU); launch floor {} "
      "us.\n\n",
      m, proxy.link_gbps, proxy.step_us, proxy.nic_gbps, proxy.net_step_us, proxy.net_post_us, gpu.net_post_us,
      proxy.net_msg_us, gpu.net_msg_us, proxy.launch_us);
  fmt::print(
      "Each cell: one call on a stream (the launch floor included; inside a kernel it is {} us less), bus bandwidth as "
      "nccl-tests counts it, and the algorithm the model picks (hier/rd and hier/hd: hierarchical with recursive "
      "doubling or halving-doubling between nodes; xP: pipelined in P chunks).\n\n",
      proxy.launch_us);
  for (shoal::collective op : {shoal::collective::reduce, shoal::collective::alltoall}) {
    for (const auto* table : {&proxy, &gpu}) {
      fmt::print("### {} {}\n\n", op == shoal::collective::reduce ? "All-reduce" : "Alltoall",
                 table == &proxy ? "through the proxy" : "with the NIC driven from the GPU");
      if (op == shoal::collective::alltoall)
        fmt::print("Size: the bytes each PE sends in all (nccl-tests' count); one block is size / PEs.\n\n");
      header();
      for (std::uint64_t size : kSizes) {
        fmt::print("| {} |", size_name(size));
        for (int k : node_counts) {
          const shoal::node_shape shape{m, k};
          const int n = shape.n_pes();
          const std::uint64_t bytes = op == shoal::collective::alltoall ? size / n : size;
          if (bytes == 0) {
            fmt::print(" (block < 1 B) |");
            continue;
          }
          fmt::print(" {} |", cell(*table, shoal::net_model_choice(*table, op, shape, bytes), op, n, bytes));
        }
        fmt::print("\n");
      }
      fmt::print("\n");
    }
  }
  // Every modelled all-reduce, to compare the choice with the flat ones and with a rail-aligned ring as NCCL's.
  fmt::print("### All-reduce by algorithm, through the proxy\n\n| size | algorithm |");
  for (int k : node_counts)
    if (k > 1) fmt::print(" {} nodes |", k);
  fmt::print("\n|---|---|");
  for (int k : node_counts)
    if (k > 1) fmt::print("---|");
  fmt::print("\n");
  for (std::uint64_t size : {std::uint64_t{64} << 10, std::uint64_t{16} << 20, std::uint64_t{1} << 30}) {
    for (shoal::algorithm a : {shoal::algorithm::one_shot, shoal::algorithm::two_shot, shoal::algorithm::ring,
                               shoal::algorithm::hierarchical}) {
      fmt::print("| {} | {} |", size_name(size), to_string(a));
      for (int k : node_counts) {
        if (k == 1) continue;
        const shoal::node_shape shape{m, k};
        fmt::print(" {} |", cell(proxy, shoal::predict_net(proxy, shoal::collective::reduce, a, shape, size),
                                 shoal::collective::reduce, shape.n_pes(), size));
      }
      fmt::print("\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shoal-info: shoal's version, this machine's GPUs and links, transports, and SHOAL_* configuration"};
  app.set_version_flag("--version", std::string(shoal::version()));
  bool env_only = false, markdown = false, json = false;
  app.add_flag("--env", env_only, "Print only the configuration (every SHOAL_* variable)");
  app.add_flag("--markdown", markdown, "With --env: print the configuration table as Markdown (docs/configuration.md)")
      ->needs(app.get_option("--env"));
  app.add_flag("--json", json, "Print everything as one JSON object")->excludes(app.get_option("--markdown"));
  int coll_pes = 0;
  // --coll and --scale-model each print one table and nothing else: asked beside another report, they refuse
  // rather than leave that report out unsaid.
  CLI::Option* coll =
      app.add_option("--coll", coll_pes, "Print the cost model's collective algorithm per size for a team of this many PEs")
          ->check(CLI::Range(1, 1 << 20))
          ->excludes("--env", "--json");
  bool scale_model = false;
  app.add_flag("--scale-model", scale_model,
               "Print the cost model's predicted all-reduce and alltoall across nodes (docs/scale-model.md)")
      ->excludes(coll, "--env", "--json");
  CLI11_PARSE(app, argc, argv);

  if (scale_model) {
    try {
      print_scale_model();
    } catch (const shoal::error& e) {
      fmt::print(stderr, "shoal-info: {}\n", e.what());
      return 1;
    }
    return 0;
  }

  if (coll_pes > 0) {
    try {
      print_coll_choices(coll_pes);
    } catch (const shoal::error& e) {
      fmt::print(stderr, "shoal-info: {}\n", e.what());
      return 1;
    }
    return 0;
  }

  if (markdown) {
    print_markdown();  // documentation: independent of this process's environment
    return 0;
  }

  std::string config_error;
  try {
    (void)shoal::detail::config::load();
    shoal::detail::check_team_settings();  // what shoal::init checks beyond the table, when it makes the world team
  } catch (const shoal::error& e) {
    config_error = e.what();
  }
  const std::vector<config_row> config = current_config();

  topology topo;
  std::string topo_error;
  if (!env_only) {
    try {
      topo = shoal::detail::discover_topology();
    } catch (const std::exception& e) {
      topo_error = e.what();
    }
  }

  if (json) {
    nlohmann::json out = to_json(topo, topo_error, config, config_error);
    if (env_only) {
      out = nlohmann::json{{"config", out["config"]}, {"config_error", out["config_error"]}};
    }
    fmt::print("{}\n", out.dump(2));
  } else {
    if (!env_only) {
      fmt::print("{}\n\n", version_line());
      print_topology(topo, topo_error, emulating_nodes(config));
      fmt::print("Network (the proxy's, between nodes): {}\n\n", shoal::detail::describe_ucx_network());
      print_work_queues(topo);
    }
    print_config(config);
  }
  std::fflush(stdout);
  if (!config_error.empty()) {
    fmt::print(stderr, "shoal-info: {}\n", config_error);
    return 1;
  }
  return 0;
}
