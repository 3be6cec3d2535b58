#include "coll/tuning.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "base/config.hpp"

namespace shoal::detail {

coll_tuning make_tuning(const coll_model_table& table, int n_pes, const algo_getenv_fn& getenv_fn) {
  coll_tuning tuning;
  for (int c = 0; c < kCollectiveCount; ++c) {
    const auto coll = static_cast<collective>(c);
    std::uint64_t ll_max = 0, one_shot_max = 0;
    for (std::uint64_t size = 1; size <= (std::uint64_t{1} << 32); size *= 2) {
      for (std::uint64_t bytes : {size, size + size / 2}) {
        const algorithm choice = model_choice(table, coll, n_pes, bytes);
        if (choice == algorithm::ll) ll_max = bytes;
        if (choice == algorithm::ll || choice == algorithm::one_shot) one_shot_max = bytes;
      }
    }
    tuning.ll_max_bytes[c] = ll_max;
    tuning.one_shot_max_bytes[c] = one_shot_max;
    // A forced choice is validated by choose_algorithm (any size: the override does not depend on it).
    const std::string_view forced = forced_algorithm(coll, getenv_fn);
    if (!forced.empty() && !names_host_composition(coll, forced))
      tuning.forced[c] = static_cast<std::int8_t>(choose_algorithm(table, coll, n_pes, 1, getenv_fn));
  }
  return tuning;
}

std::uint64_t collective_settings_digest(const coll_model_table& table, const algo_getenv_fn& getenv_fn,
                                         std::uint64_t copy_engine_bytes, std::uint64_t channels,
                                         std::uint64_t scratch_bytes, std::int64_t hierarchical_chunks) {
  std::string text = format_coll_model(table);  // every field, as the table file would hold it
  for (int c = 0; c < kCollectiveCount; ++c) {
    const auto coll = static_cast<collective>(c);
    text += fmt::format("{} = '{}'\n", algo_variable(coll), forced_algorithm(coll, getenv_fn));
  }
  text += fmt::format("ce_bytes = {}\nchannels = {}\nscratch_bytes = {}\nhierarchical_chunks = {}\n", copy_engine_bytes,
                      channels, scratch_bytes, hierarchical_chunks);
  std::uint64_t digest = 14695981039346656037ull;  // 64-bit FNV-1a
  for (const char ch : text) digest = (digest ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return digest;
}

const coll_model_table& active_coll_model() {
  static const coll_model_table table = [] {
    const std::string& path = process_config().coll_model;
    if (path.empty()) return coll_model_table{};
    try {
      return load_coll_model(path);
    } catch (const error& e) {
      throw error(e.category(), "SHOAL_COLL_MODEL", e.detail());  // the variable the user set
    }
  }();
  return table;
}

void check_team_scratch_bytes(std::uint64_t bytes) {
  if (bytes % 32 != 0)
    throw error(errc::config, "SHOAL_TEAM_SCRATCH_BYTES", fmt::format("{} is not a multiple of 32", bytes));
}

void check_team_settings() {
  (void)make_tuning(active_coll_model(), 2, [](const char* name) { return std::getenv(name); });
  check_team_scratch_bytes(process_config().team_scratch_bytes);
}

}  // namespace shoal::detail
