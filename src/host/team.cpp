#include "shoal/team.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <exception>

#include "base/config.hpp"
#include "base/log.hpp"
#include "bootstrap/node_map.hpp"
#include "coll/tuning.hpp"
#include "host/cuda_check.hpp"
#include "host/world_impl.hpp"

namespace shoal {
namespace {

constexpr std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

// A live team's id: a tag in the high bits, so that zeroed or freed memory (or a small counter a user's data
// left there) does not pass for one, and the creation's number in the low.
constexpr std::uint64_t kLiveTeamTag = 0x5EA7'0000'0000'0000ull;

void write_live_word(world::impl& w, const team_handle& h, std::uint64_t value) {
  SHOAL_CUDA_CHECK(cudaMemcpyAsync(h.live_word(), &value, sizeof(value), cudaMemcpyHostToDevice, w.stream));
  SHOAL_CUDA_CHECK(cudaStreamSynchronize(w.stream));
}

// Channels and least staged scratch per channel, parity and member of a team creation in which some team
// spans nodes (see pick() in team_handle.hpp: such teams run staged and direct steps through the proxy).
constexpr int kProxyTeamChannels = 8;
constexpr std::uint64_t kProxyTeamStagedBytes = 1024 * 1024;

// Where calls, flags, LL lines and staged data sit inside a team's one heap allocation, for `members`
// members (the largest team any PE creates in the same call, so the allocation is the same size everywhere).
struct state_layout {
  std::size_t flags_offset, ll_offset, staged_offset, bytes;
};
state_layout layout_for(std::size_t channels, std::size_t members, std::size_t ll_bytes, std::size_t staged_bytes) {
  state_layout l{};
  // calls[channels], then the word that holds the team's id while it lives (team_handle::live_word).
  l.flags_offset = round_up((channels + 1) * sizeof(std::uint64_t), 256);
  l.ll_offset = round_up(l.flags_offset + channels * members * sizeof(std::uint64_t), 256);
  l.staged_offset = round_up(l.ll_offset + channels * 2 * members * ll_bytes, 256);
  l.bytes = l.staged_offset + channels * 2 * members * staged_bytes;
  return l;
}

// Why a PE refuses a team creation: its request (the split's arguments), or its own collective settings (the
// environment it read), so that the other PEs' errors point the right way.
enum class refusal : std::int32_t { none = 0, request = 1, settings = 2 };

// What each PE brings to a team creation: the size of its team (PEs of one split may create different
// teams) and whether it refuses. Gathered from all PEs before anything is allocated, so a bad request or
// setting on any PE fails on every PE instead of leaving the others waiting.
struct creation_vote {
  std::int32_t members;
  refusal refused;
  std::int32_t sms;          // this PE's GPU's SM count
  std::int32_t spans_nodes;  // this PE's team has members on other nodes
  std::uint64_t settings;    // detail::collective_settings_digest: the same on every PE, or no team
};
struct creation_result {
  int largest_team;
  int fewest_sms;
  bool any_spans_nodes;  // some PE's team spans nodes: the state is sized for the proxy
};
// `failure` is this PE's own error, rethrown as it was when this PE is the one that refused.
creation_result agree_on_creation(world::impl& w, int members, bool spans_nodes, refusal refused,
                                  std::uint64_t settings, const char* call, const std::string& why,
                                  const std::exception_ptr& failure) {
  int sms = 1;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, w.device) != cudaSuccess) sms = 1;
  const creation_vote mine{members, refused, sms, spans_nodes ? 1 : 0, settings};
  std::vector<creation_vote> all(w.boot->n_pes());
  w.boot->all_gather(&mine, all.data(), sizeof(creation_vote));
  // A PE that refused reports its own reason first, whatever other PEs said.
  if (refused != refusal::none && failure) std::rethrow_exception(failure);
  if (refused != refusal::none) throw error(errc::invalid_argument, call, why);
  int largest = 1, fewest_sms = sms;
  bool any_spans = false;
  for (int pe = 0; pe < int(all.size()); ++pe) {
    fewest_sms = std::min(fewest_sms, int(all[pe].sms));
    any_spans |= all[pe].spans_nodes != 0;
    if (all[pe].refused == refusal::request)
      throw error(errc::invalid_argument, call,
                  fmt::format("PE {} refused the team (its request was invalid); no team was created", pe));
    if (all[pe].refused != refusal::none)
      throw error(errc::config, call,
                  fmt::format("PE {} refused the team: its collective settings (SHOAL_ALGO_*, SHOAL_COLL_MODEL, "
                              "SHOAL_COLL_CE_BYTES or SHOAL_TEAM_SCRATCH_BYTES in its environment) are invalid, and "
                              "its own error says which; no team was created",
                              pe));
    largest = std::max(largest, int(all[pe].members));
  }
  // Members pick each call's algorithm on their own, from these settings: where they differ, one member may run
  // one_shot while its peer runs direct, and each reads what the other never wrote. Judged from every PE's vote,
  // so every PE throws alike.
  for (int pe = 1; pe < int(all.size()); ++pe)
    if (all[pe].settings != all[0].settings)
      throw error(errc::config, call,
                  fmt::format("PE {} has collective settings other than PE 0's (SHOAL_ALGO_*, the SHOAL_COLL_MODEL "
                              "table, SHOAL_COLL_CE_BYTES, SHOAL_TEAM_CHANNELS, SHOAL_TEAM_SCRATCH_BYTES or "
                              "SHOAL_HIERARCHICAL_CHUNKS), so the members would run different algorithms in one call; "
                              "set them alike on every PE (a launcher may pass the environment only to the PEs of its "
                              "own node)",
                              pe));
  return {largest, std::max(fewest_sms, 1), any_spans};
}

team_layout node_layout_of(const world::impl& w) {
  if (!w.node_contiguous) {
    SHOAL_LOG_WARN(coll, "the PEs of this node are not numbered consecutively: node_team holds this PE alone");
    return team_layout::normalized(w.boot->pe(), 1, 1);
  }
  return node_layout(w.node_first_pe, w.boot->local_size());
}

}  // namespace

team::team(world& w, team_layout layout, bool request_ok, const std::string& why)
    : world_(&w.internals()), world_alive_(w.internals().alive) {
  world::impl& wi = w.internals();
  const detail::config& cfg = wi.cfg;
  int channels = int(cfg.team_channels);
  std::uint64_t scratch = cfg.team_scratch_bytes;
  bool spans_nodes = false;
  if (layout.valid() && layout.index_of(w.pe()) >= 0)
    for (int i = 0; i < layout.size; ++i) spans_nodes |= wi.on_other_node(layout.pe_at(i));
  std::exception_ptr failure;
  refusal refused = request_ok ? refusal::none : refusal::request;
  std::uint64_t settings = 0;
  // Everything that can fail on one PE is decided before the vote: the algorithm overrides, the scratch.
  try {
    const detail::algo_getenv_fn getenv_fn = [](const char* name) { return std::getenv(name); };
    handle_.tuning = detail::make_tuning(detail::active_coll_model(), std::max(layout.size, 1), getenv_fn);
    hierarchical_reduce_forced_ =
        detail::names_host_composition(collective::reduce, detail::forced_algorithm(collective::reduce, getenv_fn));
    // Read again here (init read it too), by the table's rules: empty means the default, and the range holds.
    copy_engine_bytes_ = detail::config::load().coll_ce_bytes;
    detail::check_team_scratch_bytes(scratch);
    settings = detail::collective_settings_digest(detail::active_coll_model(), getenv_fn, copy_engine_bytes_,
                                                  std::uint64_t(channels), scratch, cfg.hierarchical_chunks);
  } catch (const error&) {
    refused = refusal::settings;
    failure = std::current_exception();
  }
  const creation_result agreed = agree_on_creation(wi, layout.valid() ? layout.size : 1, spans_nodes, refused, settings,
                                                   "shoal::team", why, failure);
  std::uint64_t staged = scratch;
  if (agreed.any_spans_nodes) {
    // Through the proxy each staged step is one message per member and channel: few channels with large
    // staged scratch make few large messages, which is what a network moves well. (LL lines never cross
    // nodes, so theirs stays as configured.)
    channels = std::min(channels, kProxyTeamChannels);
    staged = std::max<std::uint64_t>(scratch, kProxyTeamStagedBytes);
  }
  const state_layout sl = layout_for(std::size_t(channels), std::size_t(agreed.largest_team), scratch, staged);
  auto* base = static_cast<std::byte*>(wi.calloc(1, sl.bytes));
  state_ = base;

  handle_.layout = layout;
  handle_.index = layout.valid() ? layout.index_of(w.pe()) : -1;
  handle_.channel_first = 0;
  handle_.channel_count = channels;
  handle_.channel_total = channels;
  handle_.ll_bytes = std::uint32_t(scratch);
  handle_.staged_bytes = std::uint32_t(staged);
  handle_.resident_ctas = agreed.fewest_sms;
  handle_.spans_nodes = spans_nodes ? 1 : 0;
  if (spans_nodes) copy_engine_bytes_ = 0;  // copy engines reach only mapped peers
  handle_.calls = reinterpret_cast<std::uint64_t*>(base);
  handle_.flags = reinterpret_cast<std::uint64_t*>(base + sl.flags_offset);
  handle_.ll = base + sl.ll_offset;
  handle_.staged = base + sl.staged_offset;
  // Debug builds' device calls compare this with the state's word, which destroy clears: a kernel handed the
  // handle of a destroyed team traps instead of using freed (perhaps reallocated) heap memory.
  handle_.id = kLiveTeamTag | ++wi.teams_created;
  write_live_word(wi, handle_, handle_.id);
  // Members on other nodes are reached through the proxy, when the job has one.
  reachable_ = !spans_nodes || wi.proxy != nullptr;
}

team::team(team&& other) noexcept
    : world_(std::exchange(other.world_, nullptr)),
      world_alive_(std::move(other.world_alive_)),
      handle_(other.handle_),
      state_(std::exchange(other.state_, nullptr)),
      reachable_(other.reachable_),
      copy_engine_bytes_(other.copy_engine_bytes_),
      hierarchical_reduce_forced_(other.hierarchical_reduce_forced_) {}

team& team::operator=(team&& other) noexcept {
  if (this != &other) {
    try {
      destroy();
    } catch (const std::exception& e) {
      SHOAL_LOG_WARN(coll, "team destroy: {}", e.what());
    }
    world_ = std::exchange(other.world_, nullptr);
    world_alive_ = std::move(other.world_alive_);
    handle_ = other.handle_;
    state_ = std::exchange(other.state_, nullptr);
    reachable_ = other.reachable_;
    copy_engine_bytes_ = other.copy_engine_bytes_;
    hierarchical_reduce_forced_ = other.hierarchical_reduce_forced_;
  }
  return *this;
}

team::~team() {
  try {
    destroy();
  } catch (const std::exception& e) {
    SHOAL_LOG_WARN(coll, "team destroy: {}", e.what());
  }
}

void team::destroy() {
  if (world_ == nullptr) return;
  world::impl* w = std::exchange(world_, nullptr);
  void* state = std::exchange(state_, nullptr);
  const team_handle was = std::exchange(handle_, team_handle{});  // every query now reports no members
  // After finalize the state went with the heap, and no PE meets any more: nothing to free.
  if (std::exchange(world_alive_, {}).expired()) return;
  if (state == nullptr) return;
  try {
    write_live_word(*w, was, 0);
  } catch (const std::exception& e) {  // still free: the other members are meeting in free
    SHOAL_LOG_WARN(coll, "team destroy: clearing the team's live word: {}", e.what());
  }
  w->free(state);
}

team_handle team::device_handle() const {
  if (!valid())
    throw error(errc::invalid_argument, "shoal::team::device_handle",
                "the team was destroyed, never created, or outlived its world");
  team_handle h = handle_;
  h.world = world_->device_handle();  // fresh: it knows the heap's current size
  return h;
}

world& team::owner() const { return *internals().self; }

world::impl& team::internals() const {
  if (!valid())
    throw error(errc::invalid_argument, "shoal::team", "the team was destroyed, never created, or outlived its world");
  return *world_;
}

namespace detail {
void create_predefined_teams(world& w) {
  world::impl& wi = w.internals();
  wi.world_team = std::make_unique<team>(w, world_layout(w.n_pes()));
  wi.node_team = std::make_unique<team>(w, node_layout_of(wi));
  // Judged from every PE's node, not this PE's alone: with nodes of 3 and 1 PEs, the lone PE's node looks
  // regular by itself, and it would wait in collectives for PEs that each formed a team of their own.
  team_layout same = same_local_rank_layout(wi.boot->local_pe(), wi.boot->local_size(), w.n_pes());
  if (!same.valid() || !detail::nodes_uniform(wi.node_of)) same = team_layout::normalized(w.pe(), 1, 1);
  wi.same_local_rank_team = std::make_unique<team>(w, same);
}
}  // namespace detail

namespace {
const team& predefined(const world& w, std::unique_ptr<team> world::impl::*which, const char* name) {
  const auto& t = w.internals().*which;
  if (!t) throw error(errc::unsupported, name, "this world has no GPU, so it has no teams (kNoDevice)");
  return *t;
}
}  // namespace

const team& world_team(const world& w) { return predefined(w, &world::impl::world_team, "shoal::world_team"); }
const team& node_team(const world& w) { return predefined(w, &world::impl::node_team, "shoal::node_team"); }
const team& same_local_rank_team(const world& w) {
  return predefined(w, &world::impl::same_local_rank_team, "shoal::same_local_rank_team");
}

team split_strided(world& w, const team& parent, int start, int stride, int size) {
  // Every PE takes part even when its request is bad, so all PEs fail together (see agree_on_creation).
  const bool parent_alive = parent.valid();
  const team_layout parent_layout = parent.layout();
  const team_layout child = parent_layout.split_strided(start, stride, size);
  // A PE outside the parent cannot judge the indices; it takes the members' word for them.
  const bool ok = parent_alive && (child.valid() || !parent.member());
  const std::string why = !parent_alive ? "the parent team was destroyed or never created"
                                        : fmt::format(
                                              "start {}, stride {}, size {} do not select members of a "
                                              "team of {} PEs",
                                              start, stride, size, parent_layout.size);
  return team(w, child, ok, why);
}

std::pair<team, team> split_2d(world& w, const team& parent, int xrange) {
  // As split_strided: a bad request takes part in the vote, so every PE fails together.
  const bool ok = parent.valid() && xrange >= 1;
  const int index = parent.valid() ? parent.my_index() : -1;
  const team_2d teams = ok && index >= 0 ? split_2d(parent.layout(), xrange, index) : team_2d{};
  const std::string why = !parent.valid() ? std::string("the parent team was destroyed or never created")
                                          : fmt::format("xrange {} is not positive", xrange);
  team x(w, teams.x, ok, why);
  team y(w, teams.y, ok, why);
  return {std::move(x), std::move(y)};
}

}  // namespace shoal
