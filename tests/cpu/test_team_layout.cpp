// Team algebra against brute force: every layout inside a small world is expanded into its explicit PE
// list, and each operation is checked against what that list says.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "shoal/team_layout.hpp"

namespace shoal {
namespace {

constexpr int kWorld = 16;

std::vector<int> members(const team_layout& t) {
  std::vector<int> pes;
  for (int i = 0; i < t.size; ++i) pes.push_back(t.start + i * t.stride);
  return pes;
}

// Every valid layout whose PEs lie in [0, kWorld).
std::vector<team_layout> all_layouts() {
  std::vector<team_layout> out;
  for (int start = 0; start < kWorld; ++start)
    for (int stride = 1; stride <= kWorld; ++stride)
      for (int size = 1; start + (size - 1) * stride < kWorld; ++size)
        if (size > 1 || stride == 1) out.push_back({start, stride, size});
  return out;
}

// Compile-time use, as kernels and constant tables will.
static_assert(world_layout(8).index_of(5) == 5);
static_assert(team_layout{1, 2, 4}.pe_at(3) == 7);
static_assert(team_layout{1, 2, 4}.index_of(4) == -1);
static_assert(team_layout{0, 2, 4}.translate(2, team_layout{0, 4, 2}) == 1);
static_assert(!team_layout{}.valid());
static_assert(split_2d(world_layout(6), 4, 5).x == team_layout{4, 1, 2});

TEST(TeamLayout, MembershipMatchesBruteForce) {
  for (const team_layout& t : all_layouts()) {
    ASSERT_TRUE(t.valid());
    const std::vector<int> pes = members(t);
    for (int pe = -2; pe < kWorld + 4; ++pe) {
      const auto it = std::find(pes.begin(), pes.end(), pe);
      const int expected = it == pes.end() ? -1 : static_cast<int>(it - pes.begin());
      EXPECT_EQ(t.index_of(pe), expected) << t.start << "," << t.stride << "," << t.size << " pe " << pe;
      EXPECT_EQ(t.contains(pe), expected >= 0);
    }
    for (int i = -1; i <= t.size; ++i) EXPECT_EQ(t.pe_at(i), (i >= 0 && i < t.size) ? pes[i] : -1);
  }
}

TEST(TeamLayout, InvalidLayoutsHaveNoMembers) {
  for (const team_layout t : {team_layout{}, team_layout{0, 0, 3}, team_layout{-1, 1, 2}, team_layout{0, 1, -1},
                              team_layout{INT_MAX - 1, 2, 2}}) {
    EXPECT_FALSE(t.valid());
    EXPECT_EQ(t.index_of(0), -1);
    EXPECT_EQ(t.pe_at(0), -1);
    EXPECT_EQ(t.translate(0, world_layout(4)), -1);
  }
  EXPECT_TRUE((team_layout{INT_MAX - 2, 2, 2}.valid()));
}

TEST(TeamLayout, TranslateMatchesBruteForceAndRoundTrips) {
  const std::vector<team_layout> layouts = all_layouts();
  for (const team_layout& from : layouts) {
    for (const team_layout& to : layouts) {
      const std::vector<int> to_pes = members(to);
      for (int i = 0; i < from.size; ++i) {
        const int pe = from.pe_at(i);
        const auto it = std::find(to_pes.begin(), to_pes.end(), pe);
        const int expected = it == to_pes.end() ? -1 : static_cast<int>(it - to_pes.begin());
        const int j = from.translate(i, to);
        ASSERT_EQ(j, expected);
        if (j >= 0) {
          ASSERT_EQ(to.translate(j, from), i);
        }
      }
      ASSERT_EQ(from.translate(-1, to), -1);
      ASSERT_EQ(from.translate(from.size, to), -1);
    }
  }
}

TEST(TeamLayout, SplitStridedMatchesBruteForce) {
  for (const team_layout& parent : all_layouts()) {
    const std::vector<int> parent_pes = members(parent);
    for (int first = -1; first <= parent.size; ++first) {
      for (int stride = -1; stride <= parent.size + 1; ++stride) {
        for (int size = -1; size <= parent.size + 1; ++size) {
          const team_layout sub = parent.split_strided(first, stride, size);
          const bool ok = first >= 0 && stride >= 1 && size >= 1 && first + (size - 1) * stride < parent.size;
          ASSERT_EQ(sub.valid(), ok) << first << " " << stride << " " << size;
          if (!ok) {
            EXPECT_EQ(sub.size, 0);
            continue;
          }
          std::vector<int> expected;
          for (int k = 0; k < size; ++k) expected.push_back(parent_pes[first + k * stride]);
          ASSERT_EQ(members(sub), expected);
          if (size == 1) {
            EXPECT_EQ(sub.stride, 1);
          }
        }
      }
    }
  }
}

TEST(TeamLayout, SplitStridedHugeStrideWithOneMember) {
  const team_layout sub = world_layout(8).split_strided(3, INT_MAX, 1);
  EXPECT_EQ(sub, (team_layout{3, 1, 1}));
}

// split_2d by its definition: row = index / xrange, column = index % xrange (xrange capped at size).
TEST(TeamLayout, Split2dMatchesBruteForce) {
  for (const team_layout& parent : all_layouts()) {
    for (int xrange = 1; xrange <= parent.size + 2; ++xrange) {
      const int xr = std::min(xrange, parent.size);
      for (int i = 0; i < parent.size; ++i) {
        std::vector<int> row, column;
        for (int j = 0; j < parent.size; ++j) {
          if (j / xr == i / xr) row.push_back(parent.pe_at(j));
          if (j % xr == i % xr) column.push_back(parent.pe_at(j));
        }
        const team_2d t = split_2d(parent, xrange, i);
        ASSERT_TRUE(t.x.valid() && t.y.valid());
        ASSERT_EQ(members(t.x), row) << "xrange " << xrange << " index " << i;
        ASSERT_EQ(members(t.y), column) << "xrange " << xrange << " index " << i;
        ASSERT_EQ(t.x.index_of(parent.pe_at(i)), t.x_index);
        ASSERT_EQ(t.y.index_of(parent.pe_at(i)), t.y_index);
        ASSERT_EQ(t.x_index, i % xr);
        ASSERT_EQ(t.y_index, i / xr);
      }
    }
  }
}

TEST(TeamLayout, Split2dRejectsBadArguments) {
  const team_layout parent = world_layout(6);
  for (const team_2d t : {split_2d(parent, 0, 0), split_2d(parent, -2, 0), split_2d(parent, 2, -1),
                          split_2d(parent, 2, 6), split_2d(team_layout{}, 2, 0)}) {
    EXPECT_FALSE(t.x.valid());
    EXPECT_FALSE(t.y.valid());
    EXPECT_EQ(t.x_index, -1);
  }
}

TEST(TeamLayout, PredefinedTeams) {
  EXPECT_EQ(world_layout(8), (team_layout{0, 1, 8}));
  EXPECT_FALSE(world_layout(0).valid());
  EXPECT_EQ(node_layout(4, 4), (team_layout{4, 1, 4}));
  // 3 nodes of 4 PEs: local PE 1 of every node is PEs 1, 5, 9.
  EXPECT_EQ(members(same_local_rank_layout(1, 4, 12)), (std::vector<int>{1, 5, 9}));
  EXPECT_EQ(same_local_rank_layout(2, 4, 4), (team_layout{2, 1, 1}));
  EXPECT_FALSE(same_local_rank_layout(4, 4, 12).valid());  // local PE out of range
  EXPECT_FALSE(same_local_rank_layout(0, 4, 10).valid());  // unequal nodes
  EXPECT_FALSE(same_local_rank_layout(0, 0, 8).valid());
  // Every PE is in exactly one node team and exactly one same-local-rank team, at matching indices.
  for (int local_size : {1, 2, 4, 8}) {
    for (int pe = 0; pe < kWorld; ++pe) {
      const team_layout node = node_layout(pe / local_size * local_size, local_size);
      const team_layout same = same_local_rank_layout(pe % local_size, local_size, kWorld);
      EXPECT_EQ(node.index_of(pe), pe % local_size);
      EXPECT_EQ(same.index_of(pe), pe / local_size);
    }
  }
}

}  // namespace
}  // namespace shoal
