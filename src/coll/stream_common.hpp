// Shared by the on-stream collectives (shoal/coll_stream.hpp): argument checks and the launch shape.
// fmt-free, for the .cu files.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shoal/coll_stream.hpp"
#include "shoal/team_handle.hpp"

namespace shoal::detail {

// The team's handle narrowed to `channels`, after checking the team is alive, this PE is a member and
// the range is inside the team's channels. Throws shoal::error naming `call`.
team_handle stream_view(const team& t, channel_range channels, const char* call);

// Throws unless [p, p + bytes) is symmetric (heap or registered) on this PE. `what` names the argument.
void check_buffer(const team& t, const void* p, std::size_t bytes, const char* call, const char* what);
void check_root(const team& t, int root, const char* call);
void check_op_for_floating(reduce_op op, const char* call);  // bit operators: integers only
void check_no_overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes, const char* call);

inline constexpr unsigned kCollThreads = 512;

struct coll_launch {
  unsigned ctas;
  unsigned threads;
};
// CTAs for a grid-scope collective running `algo`: as many as give each a useful share, at most the
// view's channels; the same on every member. LL and staged steps carry `block_bytes` (what one member
// sends one peer) per CTA and step; the other algorithms stream `total_bytes` (what a member moves).
coll_launch plan_launch(const team_handle& t, algorithm algo, std::uint64_t block_bytes, std::uint64_t total_bytes);

// Throws shoal::error(errc::cuda) naming `call` when the last launch failed.
void check_launch(const char* call);

}  // namespace shoal::detail
