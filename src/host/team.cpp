#include "shoal/team.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "base/config.hpp"
#include "base/log.hpp"
#include "coll/tuning.hpp"
#include "host/world_impl.hpp"

namespace shoal {
namespace {

constexpr std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

// Where calls, flags and scratch sit inside a team's one heap allocation, for `members` members (the
// largest team any PE creates in the same call, so the allocation is the same size everywhere).
struct state_layout {
  std::size_t flags_offset, scratch_offset, bytes;
};
state_layout layout_for(std::size_t channels, std::size_t members, std::size_t scratch_bytes) {
  state_layout l{};
  l.flags_offset = round_up(channels * sizeof(std::uint64_t), 256);
  l.scratch_offset = round_up(l.flags_offset + channels * members * sizeof(std::uint64_t), 256);
  l.bytes = l.scratch_offset + channels * 2 * members * scratch_bytes;
  return l;
}

// The largest team size over all PEs (each PE may be creating a different team of a split).
int largest_over_world(world::impl& w, int mine) {
  std::vector<int> all(w.boot->n_pes());
  w.boot->all_gather(&mine, all.data(), sizeof(int));
  return *std::max_element(all.begin(), all.end());
}

team_layout node_layout_of(const world::impl& w) {
  if (!w.node_contiguous) {
    SHOAL_LOG_WARN(coll, "the PEs of this node are not numbered consecutively: node_team holds this PE alone");
    return team_layout::normalized(w.boot->pe(), 1, 1);
  }
  return node_layout(w.node_first_pe, w.boot->local_size());
}

}  // namespace

team::team(world& w, team_layout layout) : world_(&w.internals()) {
  world::impl& wi = w.internals();
  const detail::config& cfg = wi.cfg;
  const int channels = int(cfg.team_channels);
  const std::uint64_t scratch = cfg.team_scratch_bytes;
  if (scratch % 32 != 0)
    throw error(errc::config, "SHOAL_TEAM_SCRATCH_BYTES", fmt::format("{} is not a multiple of 32", scratch));
  const int members = largest_over_world(wi, layout.valid() ? layout.size : 1);
  const state_layout sl = layout_for(std::size_t(channels), std::size_t(members), scratch);
  auto* base = static_cast<std::byte*>(wi.calloc(1, sl.bytes));
  state_ = base;

  handle_.layout = layout;
  handle_.index = layout.valid() ? layout.index_of(w.pe()) : -1;
  handle_.channel_first = 0;
  handle_.channel_count = channels;
  handle_.channel_total = channels;
  handle_.ll_bytes = std::uint32_t(scratch);
  handle_.calls = reinterpret_cast<std::uint64_t*>(base);
  handle_.flags = reinterpret_cast<std::uint64_t*>(base + sl.flags_offset);
  handle_.ll = base + sl.scratch_offset;
  handle_.tuning = detail::make_tuning(detail::active_coll_model(), std::max(layout.size, 1),
                                       [](const char* name) { return std::getenv(name); });
}

team::team(team&& other) noexcept
    : world_(std::exchange(other.world_, nullptr)),
      handle_(other.handle_),
      state_(std::exchange(other.state_, nullptr)) {}

team& team::operator=(team&& other) noexcept {
  if (this != &other) {
    try {
      destroy();
    } catch (const std::exception& e) {
      SHOAL_LOG_WARN(coll, "team destroy: {}", e.what());
    }
    world_ = std::exchange(other.world_, nullptr);
    handle_ = other.handle_;
    state_ = std::exchange(other.state_, nullptr);
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
  if (state_ != nullptr) w->free(state_);
  state_ = nullptr;
  handle_.index = -1;
}

team_handle team::device_handle() const {
  if (world_ == nullptr)
    throw error(errc::invalid_argument, "shoal::team::device_handle", "the team was destroyed or never created");
  team_handle h = handle_;
  h.world = world_->device_handle();  // fresh: it knows the heap's current size
  return h;
}

world& team::owner() const { return *internals().self; }

world::impl& team::internals() const {
  if (world_ == nullptr)
    throw error(errc::invalid_argument, "shoal::team", "the team was destroyed or never created");
  return *world_;
}

namespace detail {
void create_predefined_teams(world& w) {
  world::impl& wi = w.internals();
  wi.world_team = std::make_unique<team>(w, world_layout(w.n_pes()));
  wi.node_team = std::make_unique<team>(w, node_layout_of(wi));
  team_layout same = same_local_rank_layout(wi.boot->local_pe(), wi.boot->local_size(), w.n_pes());
  if (!same.valid() || !wi.node_contiguous) same = team_layout::normalized(w.pe(), 1, 1);
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
  parent.internals();  // throws for a destroyed parent
  const team_layout parent_layout = parent.layout();
  const team_layout child = parent_layout.split_strided(start, stride, size);
  if (!child.valid())
    throw error(errc::invalid_argument, "shoal::split_strided",
                fmt::format("start {}, stride {}, size {} do not select members of a team of {} PEs", start, stride,
                            size, parent_layout.size));
  return team(w, child);
}

std::pair<team, team> split_2d(world& w, const team& parent, int xrange) {
  if (xrange < 1)
    throw error(errc::invalid_argument, "shoal::split_2d", fmt::format("xrange {} is not positive", xrange));
  parent.internals();  // throws for a destroyed parent
  const int index = parent.my_index();
  const team_2d teams = index >= 0 ? split_2d(parent.layout(), xrange, index) : team_2d{};
  team x(w, teams.x);
  team y(w, teams.y);
  return {std::move(x), std::move(y)};
}

}  // namespace shoal
