#include "coll/tuning.hpp"

#include <cstdlib>
#include <mutex>

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

const coll_model_table& active_coll_model() {
  static const coll_model_table table = [] {
    const std::string& path = process_config().coll_model;
    return path.empty() ? coll_model_table{} : load_coll_model(path);
  }();
  return table;
}

}  // namespace shoal::detail
