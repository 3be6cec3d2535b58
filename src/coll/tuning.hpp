// From the cost model to what kernels read: the size thresholds of each collective's algorithms for a
// team of n PEs, and the SHOAL_ALGO_<COLLECTIVE> overrides. Host only.
#pragma once

#include "coll/cost_model.hpp"
#include "shoal/team_handle.hpp"

namespace shoal::detail {

// Thresholds come from a scan of sizes (powers of two and the halves between, 1 B to 4 GiB): ll up to
// the largest size where the model picks ll, one_shot up to the largest where it picks ll or one_shot.
// Throws shoal::error(errc::config) for a bad SHOAL_ALGO_* value.
coll_tuning make_tuning(const coll_model_table& table, int n_pes, const algo_getenv_fn& getenv_fn);

// A digest of the settings that decide, alike on every member, which algorithm and which path a call takes: the
// model's table (SHOAL_COLL_MODEL), the SHOAL_ALGO_* values as the model reads them (unset, blank and "auto" are
// one value), the copy-engine threshold (SHOAL_COLL_CE_BYTES), the team state's channels and scratch, and the
// hierarchical all-reduce's chunk count (SHOAL_HIERARCHICAL_CHUNKS, as init read it). Team
// creation compares it across PEs: members that chose differently ran different algorithms against each other
// in one call, which hung until the wait timeout or, as one_shot against direct, left wrong results silently.
std::uint64_t collective_settings_digest(const coll_model_table& table, const algo_getenv_fn& getenv_fn,
                                         std::uint64_t copy_engine_bytes, std::uint64_t channels,
                                         std::uint64_t scratch_bytes, std::int64_t hierarchical_chunks);

// The table the library uses: SHOAL_COLL_MODEL's file when set, else the built-in defaults.
const coll_model_table& active_coll_model();

// Team scratch holds LL lines of 32 bytes: throws shoal::error(errc::config) naming SHOAL_TEAM_SCRATCH_BYTES
// when `bytes` is not a multiple of 32.
void check_team_scratch_bytes(std::uint64_t bytes);

// What team creation reads beyond the configuration table's own checks (SHOAL_COLL_MODEL's file, the
// SHOAL_ALGO_* names, the scratch's multiple of 32), checked as creating a team would, for shoal-info --env.
// Throws shoal::error(errc::config) naming the variable.
void check_team_settings();

}  // namespace shoal::detail
