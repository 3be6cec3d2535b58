// shoal::team_layout: the PE set of a team, {start, stride, size}, and its algebra (membership, index
// <-> PE, translation between teams, split_strided, split_2d), shared by the host and the device.
// Everything is constexpr and trivially copyable, so a team's layout travels to kernels by value.
// A layout with size 0 is "no team": the result of every invalid request, so callers test valid().
#pragma once

#include <climits>
#include <cstdint>
#include <type_traits>

#include "shoal/detail/host_device.hpp"

namespace shoal {

// Members are the world PEs start, start + stride, ..., start + (size - 1) * stride; team index i is the
// i-th of them. Valid when start >= 0, stride >= 1, size >= 1 and the last PE fits in an int. Layouts
// made by this header hold stride 1 when size is 1, so equal member sets compare equal with ==.
struct team_layout {
  int start = 0;
  int stride = 1;
  int size = 0;

  SHOAL_HD constexpr bool valid() const {
    return start >= 0 && stride >= 1 && size >= 1 &&
           std::int64_t{start} + std::int64_t{size - 1} * stride <= std::int64_t{INT_MAX};
  }

  // Team index of world PE `pe`, or -1 when `pe` is not a member.
  SHOAL_HD constexpr int index_of(int pe) const {
    if (!valid() || pe < start) return -1;
    const int offset = pe - start;
    if (offset % stride != 0) return -1;
    const int index = offset / stride;
    return index < size ? index : -1;
  }

  SHOAL_HD constexpr bool contains(int pe) const { return index_of(pe) >= 0; }

  // World PE of team index `index`, or -1 when the index is outside [0, size).
  SHOAL_HD constexpr int pe_at(int index) const {
    return (valid() && index >= 0 && index < size) ? start + index * stride : -1;
  }

  // OpenSHMEM team_translate_pe: the index in `to` of this team's member `index`, or -1 when that
  // member is not in `to` (or `index` is not a member of this team).
  SHOAL_HD constexpr int translate(int index, const team_layout& to) const {
    const int pe = pe_at(index);
    return pe < 0 ? -1 : to.index_of(pe);
  }

  // OpenSHMEM team_split_strided: the members at this team's indices start_index, start_index + stride,
  // ..., size of them. Invalid (size 0) unless stride >= 1, size >= 1 and every index is a member.
  SHOAL_HD constexpr team_layout split_strided(int start_index, int index_stride, int sub_size) const {
    if (!valid() || start_index < 0 || index_stride < 1 || sub_size < 1) return {};
    const std::int64_t last_index = std::int64_t{start_index} + std::int64_t{sub_size - 1} * index_stride;
    if (last_index >= size) return {};
    // With two or more members the new stride is at most the span of this team, so it fits in an int.
    return normalized(pe_at(start_index), sub_size == 1 ? 1 : index_stride * stride, sub_size);
  }

  // Builds a layout, holding stride 1 for a single member.
  SHOAL_HD static constexpr team_layout normalized(int first_pe, int pe_stride, int n) {
    return team_layout{first_pe, n == 1 ? 1 : pe_stride, n};
  }

  friend constexpr bool operator==(const team_layout&, const team_layout&) = default;
};

// The two teams OpenSHMEM team_split_2d gives one member: the parent's members are laid out in rows
// of `xrange` by team index (index i sits at column i % xrange, row i / xrange; the last row may be
// short). x is the member's row, y its column; x_index and y_index are the member's index in each.
struct team_2d {
  team_layout x;
  team_layout y;
  int x_index = -1;
  int y_index = -1;
};

// split_2d of `parent` as seen by its member `index`. An xrange above the parent's size acts as the
// parent's size (one row). Both teams are invalid when xrange < 1 or `index` is not a member.
SHOAL_HD constexpr team_2d split_2d(const team_layout& parent, int xrange, int index) {
  if (!parent.valid() || xrange < 1 || index < 0 || index >= parent.size) return {};
  const int row_length = xrange < parent.size ? xrange : parent.size;
  const int column = index % row_length;
  const int row = index / row_length;
  const int row_start = row * row_length;
  const int row_size = parent.size - row_start < row_length ? parent.size - row_start : row_length;
  const int column_size = (parent.size - column + row_length - 1) / row_length;
  return team_2d{
      .x = parent.split_strided(row_start, 1, row_size),
      .y = parent.split_strided(column, row_length, column_size),
      .x_index = column,
      .y_index = row,
  };
}

// --- predefined teams

// Every PE of the job.
SHOAL_HD constexpr team_layout world_layout(int n_pes) { return team_layout::normalized(0, 1, n_pes); }

// The PEs of one node when the node's PEs are consecutive world PEs (device_handle::node_contiguous).
SHOAL_HD constexpr team_layout node_layout(int first_pe, int local_size) {
  return team_layout::normalized(first_pe, 1, local_size);
}

// One PE per node, each with node-local index `local_pe`, when nodes are consecutive and all hold
// `local_size` PEs. Invalid otherwise (then the team is not strided and needs another representation).
SHOAL_HD constexpr team_layout same_local_rank_layout(int local_pe, int local_size, int n_pes) {
  if (local_size < 1 || n_pes < 1 || n_pes % local_size != 0 || local_pe < 0 || local_pe >= local_size) return {};
  return team_layout::normalized(local_pe, local_size, n_pes / local_size);
}

static_assert(std::is_trivially_copyable_v<team_layout>, "layouts are passed to kernels by value");
static_assert(std::is_trivially_copyable_v<team_2d>);
static_assert(sizeof(team_layout) == 3 * sizeof(int));

}  // namespace shoal
