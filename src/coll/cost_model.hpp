// The library side of the collective cost model (shoal/coll_model.hpp): reading and writing table
// files, and choosing an algorithm with the SHOAL_ALGO_<COLLECTIVE> overrides applied.
// Table file format, one setting a line:   key = value    # comment
// Keys are coll_model_table's fields (the node shape's as whole numbers); a key left out keeps the default.
// Header-only.
#pragma once

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>

#include "shoal/coll_model.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {

struct coll_model_key {
  std::string_view name;
  double coll_model_table::*field;
  bool zero_allowed;  // latencies may be 0; bandwidths and the chunk size may not (they divide)
};

inline constexpr coll_model_key kCollModelKeys[] = {
    {"launch_us", &coll_model_table::launch_us, true},
    {"step_us", &coll_model_table::step_us, true},
    {"ll_step_us", &coll_model_table::ll_step_us, true},
    {"link_gbps", &coll_model_table::link_gbps, false},
    {"ll_link_gbps", &coll_model_table::ll_link_gbps, false},
    {"local_gbps", &coll_model_table::local_gbps, false},
    {"chunk_bytes", &coll_model_table::chunk_bytes, false},
    // Between nodes (the scale model): nothing the runtime picks depends on these.
    {"nic_gbps", &coll_model_table::nic_gbps, false},
    {"net_step_us", &coll_model_table::net_step_us, true},
    {"net_post_us", &coll_model_table::net_post_us, true},
    {"net_msg_us", &coll_model_table::net_msg_us, true},
};

inline constexpr std::size_t kChunkBytesKey = 6;  // kCollModelKeys[6] is chunk_bytes
static_assert(kCollModelKeys[kChunkBytesKey].name == "chunk_bytes");
inline constexpr double kMinChunkBytes = 64;

// The node shape's keys: whole numbers from 1 to kMaxShapeCount, and their product no more than that.
struct coll_model_count_key {
  std::string_view name;
  int coll_model_table::*field;
};

inline constexpr int kMaxShapeCount = 1 << 20;
inline constexpr coll_model_count_key kCollModelCountKeys[] = {
    {"gpus_per_node", &coll_model_table::gpus_per_node},
    {"nodes", &coll_model_table::nodes},
};

inline std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// Parses a table file's text, starting from the default table. `source` names the file in errors.
// Throws shoal::error(errc::config) naming the source and line for: a line without '=', an unknown
// key, a key given twice, a value that is not a finite number, a negative value, a zero bandwidth, a
// chunk_bytes below kMinChunkBytes or not whole, or a node shape that is not a whole number from 1 up or whose
// product passes kMaxShapeCount.
inline coll_model_table parse_coll_model(std::string_view text, std::string_view source) {
  coll_model_table table;
  constexpr std::size_t kKeys = std::size(kCollModelKeys) + std::size(kCollModelCountKeys);
  bool seen[kKeys] = {};
  auto name_of = [](std::size_t k) {
    return k < std::size(kCollModelKeys) ? kCollModelKeys[k].name
                                         : kCollModelCountKeys[k - std::size(kCollModelKeys)].name;
  };
  int line_number = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++line_number;
    auto fail = [&](std::string_view why) {
      throw error(errc::config, "collective cost model", fmt::format("{}:{}: {}", source, line_number, why));
    };
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) fail(fmt::format("'{}' is not 'key = value'", line));
    const std::string_view key = trim(line.substr(0, eq));
    const std::string_view value = trim(line.substr(eq + 1));
    std::size_t k = 0;
    while (k < kKeys && name_of(k) != key) ++k;
    if (k == kKeys) {
      std::string known;
      for (std::size_t i = 0; i < kKeys; ++i) known += fmt::format("{}{}", known.empty() ? "" : ", ", name_of(i));
      fail(fmt::format("unknown key '{}' (known: {})", key, known));
    }
    if (seen[k]) fail(fmt::format("'{}' is set twice", key));
    seen[k] = true;
    double number = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (value.empty() || ec != std::errc{} || ptr != value.data() + value.size() || !std::isfinite(number))
      fail(fmt::format("'{}' is not a number for {}", value, key));
    if (k >= std::size(kCollModelKeys)) {
      if (number != std::floor(number) || number < 1 || number > kMaxShapeCount)
        fail(fmt::format("{} = {} must be a whole number from 1 to {}", key, value, kMaxShapeCount));
      table.*kCollModelCountKeys[k - std::size(kCollModelKeys)].field = static_cast<int>(number);
      continue;
    }
    if (number < 0 || (number == 0 && !kCollModelKeys[k].zero_allowed))
      fail(fmt::format("{} = {} must be {}", key, value, kCollModelKeys[k].zero_allowed ? ">= 0" : "> 0"));
    // A staged step carries at least one LL line pair per channel; a tiny chunk would count billions of steps.
    if (k == kChunkBytesKey && (number < kMinChunkBytes || number != std::floor(number)))
      fail(fmt::format("{} = {} must be a whole number of bytes from {} up", key, value, kMinChunkBytes));
    table.*kCollModelKeys[k].field = number;
  }
  if (static_cast<std::int64_t>(table.gpus_per_node) * table.nodes > kMaxShapeCount)
    throw error(errc::config, "collective cost model",
                fmt::format("{}: gpus_per_node x nodes = {} x {} is more than {} PEs", source, table.gpus_per_node,
                            table.nodes, kMaxShapeCount));
  return table;
}

// Reads a table file. Throws shoal::error(errc::config) when it cannot be read or does not parse.
inline coll_model_table load_coll_model(const std::string& path) {
  // A directory opens as a stream and then reads as nothing, which would parse as the default table.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw error(errc::config, "collective cost model", fmt::format("cannot read {}: it is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw error(errc::config, "collective cost model", fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::string text;
  for (char buffer[4096]; in.read(buffer, sizeof(buffer)) || in.gcount() > 0;)
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
  if (in.bad())  // a read error part-way would otherwise pass as a shorter file
    throw error(errc::config, "collective cost model", fmt::format("cannot read {}: a read failed", path));
  return parse_coll_model(text, path);
}

// A table as file text, every key present; parse_coll_model reads back the same values.
inline std::string format_coll_model(const coll_model_table& table) {
  std::string out;
  for (const auto& entry : kCollModelKeys) out += fmt::format("{} = {}\n", entry.name, table.*entry.field);
  for (const auto& entry : kCollModelCountKeys) out += fmt::format("{} = {}\n", entry.name, table.*entry.field);
  return out;
}

// "SHOAL_ALGO_REDUCE" and so on. barrier's variable also serves sync.
inline std::string algo_variable(collective op) {
  std::string name = "SHOAL_ALGO_";
  for (char c : to_string(op)) name += static_cast<char>(c - 'a' + 'A');
  return name;
}

using algo_getenv_fn = std::function<const char*(const char*)>;

// What SHOAL_ALGO_<COLLECTIVE> forces, trimmed (read through `getenv_fn`): empty when it is unset, blank
// or "auto", that is when the model chooses.
inline std::string_view forced_algorithm(collective op, const algo_getenv_fn& getenv_fn) {
  const char* forced = getenv_fn ? getenv_fn(algo_variable(op).c_str()) : nullptr;
  const std::string_view value = forced ? trim(forced) : std::string_view{};
  return value == "auto" ? std::string_view{} : value;
}

// SHOAL_ALGO_REDUCE=hierarchical: the world team's on-stream all-reduce across nodes composes three
// collectives (coll/hierarchical.hpp) instead of running one kernel. The kernels it launches, and every
// call it does not apply to, choose by the model.
inline bool names_host_composition(collective op, std::string_view value) {
  return op == collective::reduce && value == to_string(algorithm::hierarchical);
}

// The algorithm to run: SHOAL_ALGO_<COLLECTIVE> when set (read through `getenv_fn`), else the model's
// choice. Unset, empty or "auto" means the model, and so does a host composition (names_host_composition:
// the kernels it launches choose by the model). Throws shoal::error(errc::config) naming the variable
// when the value is not an algorithm, or names one that does not implement this collective.
inline algorithm choose_algorithm(const coll_model_table& table, collective op, int n_pes, std::uint64_t bytes,
                                  const algo_getenv_fn& getenv_fn) {
  const std::string_view value = forced_algorithm(op, getenv_fn);
  if (value.empty() || names_host_composition(op, value)) return model_choice(table, op, n_pes, bytes);
  const std::optional<algorithm> algo = algorithm_from_string(value);
  if (!algo || !supports(op, *algo)) {
    std::string accepted = "auto";
    for (int i = 0; i < kAlgorithmCount; ++i)
      if (supports(op, static_cast<algorithm>(i))) accepted += fmt::format(",{}", to_string(static_cast<algorithm>(i)));
    if (op == collective::reduce) accepted += fmt::format(",{}", to_string(algorithm::hierarchical));
    throw error(errc::config, algo_variable(op),
                fmt::format("'{}' is not valid: expected one of {} ({} algorithms)", value, accepted, to_string(op)));
  }
  return *algo;
}

}  // namespace shoal::detail
