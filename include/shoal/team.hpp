// shoal::team: a set of PEs that run collectives together, and the owner of their synchronization
// state and scratch in the symmetric heap (sized at creation from SHOAL_TEAM_CHANNELS and
// SHOAL_TEAM_SCRATCH_BYTES, or at most 8 channels of at least 1 MiB when a team of the creation spans
// nodes; there is no limit on the number of teams beyond heap space).
//
// Predefined teams live as long as their world: world_team(w) (every PE), node_team(w) (the PEs of
// this PE's node: its load/store domain) and same_local_rank_team(w) (one PE per node, those with this
// PE's local index). User teams come from split_strided and split_2d.
//
// Creating and destroying a team is collective over the *whole world*, members or not (OpenSHMEM asks
// only the parent team): a team's state is a symmetric heap allocation, and heap calls are collective
// over the world. A PE outside the new team gets a team with member() == false, which it must still
// destroy (or let go out of scope) in the same order as the members. A team may outlive its world (a
// member declared before the world in a class): finalize takes the team's state with the heap, and the
// team then reports no members, as a destroyed one does.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "shoal/team_handle.hpp"
#include "shoal/team_layout.hpp"
#include "shoal/world.hpp"

namespace shoal {

class team {
 public:
  team() = default;  // no team: every query reports no members and device_handle() throws
  team(team&& other) noexcept;
  team& operator=(team&& other) noexcept;
  team(const team&) = delete;
  team& operator=(const team&) = delete;
  ~team();  // destroy(), logging instead of throwing

  // Collective over the world (see above): frees the team's state. The team must not be used after,
  // on the host or in a kernel; the host API throws shoal::error for a destroyed team. After the world
  // finalized, nothing is left to free and no PE meets: destroy() only lets go.
  void destroy();

  // Created, not destroyed, and its world not finalized.
  bool valid() const noexcept { return world_ != nullptr && !world_alive_.expired(); }
  // The queries below report no members once the team is destroyed or its world finalized.
  bool member() const noexcept { return queried().index >= 0; }
  int size() const noexcept { return queried().layout.size; }
  int my_index() const noexcept { return queried().index; }  // -1 on a PE outside the team
  team_layout layout() const noexcept { return queried().layout; }
  // World PE of member `index`, or -1.
  int pe_of(int index) const noexcept { return queried().layout.pe_at(index); }
  // OpenSHMEM team_translate_pe: the index in `to` of this team's member `index`, or -1.
  int translate(int index, const team& to) const noexcept { return queried().layout.translate(index, to.layout()); }

  // The view kernels take by value. Throws shoal::error for a destroyed or default-constructed team.
  team_handle device_handle() const;
  world& owner() const;            // the world the team belongs to; throws like device_handle()
  world::impl& internals() const;  // the runtime of that world

  // Collective over the world: allocates the state of a team with `layout` (invalid on PEs outside it).
  // When any PE passes request_ok = false (`why` says what was wrong), every PE throws and nothing is
  // allocated. Used by the functions below and by init; applications call split_strided or split_2d.
  team(world& w, team_layout layout, bool request_ok = true, const std::string& why = {});

  // Whether every member can be reached from this PE: by loads and stores, or through the proxy when the
  // job has one (members on other nodes). On-stream calls refuse a team that is not.
  bool reachable() const noexcept { return reachable_; }

  // On-stream direct broadcast, fcollect and alltoall, and a two-member team's reductions, move blocks of
  // at least this many bytes with the copy engines instead of SM copies (SHOAL_COLL_CE_BYTES when the team
  // was created; 0: never, as on a team that spans nodes).
  std::uint64_t copy_engine_bytes() const noexcept { return copy_engine_bytes_; }

  // SHOAL_ALGO_REDUCE=hierarchical when the team was created: the on-stream all-reduce of the world team
  // across nodes composes node and network collectives wherever that applies (read once, like every
  // setting the members vote on at creation).
  bool hierarchical_reduce_forced() const noexcept { return hierarchical_reduce_forced_; }

 private:
  inline static const team_handle no_team_{};
  const team_handle& queried() const noexcept { return valid() ? handle_ : no_team_; }

  world::impl* world_ = nullptr;           // the world's runtime, which stays put when the world object moves
  std::weak_ptr<const void> world_alive_;  // expires when that world finalizes (world::impl::alive)
  team_handle handle_{};
  void* state_ = nullptr;  // heap allocation holding calls, flags and scratch
  bool reachable_ = true;
  std::uint64_t copy_engine_bytes_ = 0;
  bool hierarchical_reduce_forced_ = false;
};

// The predefined teams of `w` (created by init, destroyed with the world).
const team& world_team(const world& w);
const team& node_team(const world& w);
// One PE per node, when every node holds the same number of consecutively numbered PEs; otherwise (judged
// from every node, so on every PE alike) a team with this PE alone.
const team& same_local_rank_team(const world& w);

// OpenSHMEM team_split_strided: the parent's members at indices start, start + stride, ..., `size` of
// them. Collective over the world. Throws shoal::error when the indices are not members of `parent`.
team split_strided(world& w, const team& parent, int start, int stride, int size);

// OpenSHMEM team_split_2d: the parent's members in rows of `xrange`; returns {x team (this PE's row),
// y team (its column)}. Collective over the world; a PE outside `parent` gets two non-member teams.
std::pair<team, team> split_2d(world& w, const team& parent, int xrange);

}  // namespace shoal
