// detail::split_range, which gives each unit of a collective its share (host and device share the code):
// the parts tile [0, count) in order, start on group boundaries, differ by at most one group, and its 32-bit
// arithmetic (a shift for powers of two) agrees with plain 64-bit arithmetic, in groups coarsened to fit
// 32 bits past 2^32 of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "shoal/dev/coll/detail/range.hpp"

namespace {

using shoal::detail::range;
using shoal::detail::split_range;

// The group the split uses: the caller's, doubled until the count has at most 2^32 - 1 groups.
std::uint64_t coarse_group(std::uint64_t count, std::uint64_t group) {
  while ((count + group - 1) / group > UINT32_MAX) group *= 2;
  return group;
}

// The split written out in 64-bit arithmetic, as a reference.
range reference_split(std::uint64_t count, std::uint64_t caller_group, int part, int parts) {
  const std::uint64_t group = coarse_group(count, caller_group);
  const std::uint64_t groups = (count + group - 1) / group;
  const std::uint64_t per = groups / std::uint64_t(parts), extra = groups % std::uint64_t(parts);
  const std::uint64_t p = std::uint64_t(part);
  const std::uint64_t first = p * per + std::min(p, extra), n = per + (p < extra ? 1 : 0);
  return {std::min(first * group, count), std::min((first + n) * group, count)};
}

void expect_tiling(std::uint64_t count, std::uint64_t group, int parts) {
  std::uint64_t next = 0, smallest = UINT64_MAX, largest = 0;
  for (int part = 0; part < parts; ++part) {
    const range r = split_range(count, group, part, parts);
    const range want = reference_split(count, group, part, parts);
    ASSERT_EQ(r.begin, want.begin) << "count " << count << " group " << group << " part " << part << "/" << parts;
    ASSERT_EQ(r.end, want.end) << "count " << count << " group " << group << " part " << part << "/" << parts;
    ASSERT_EQ(r.begin, next) << "parts must tile the count in order";
    ASSERT_LE(r.begin, r.end);
    ASSERT_TRUE(r.begin == count || r.begin % group == 0) << "a part starts on a group boundary";
    next = r.end;
    if (r.end < count) smallest = std::min(smallest, r.size()), largest = std::max(largest, r.size());
  }
  EXPECT_EQ(next, count);
  if (largest != 0)
    EXPECT_LE(largest - smallest, coarse_group(count, group)) << "full parts differ by at most one group";
}

TEST(SplitRange, TilesSmallCountsExactly) {
  for (std::uint64_t group : {1, 2, 4, 8, 16})
    for (int parts : {1, 2, 3, 4, 7, 32, 132})
      for (std::uint64_t count = 0; count < 600; ++count) expect_tiling(count, group, parts);
}

TEST(SplitRange, RandomCountsAgreeWithTheReference) {
  std::mt19937_64 rng(20261130);
  std::uniform_int_distribution<int> parts_of(1, 1024);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::uint64_t count = rng() >> (rng() % 40 + 20);  // 4 bits .. 44 bits
    const std::uint64_t group = std::uint64_t{1} << (rng() % 5);
    expect_tiling(count, group, parts_of(rng));
  }
}

TEST(SplitRange, CountsBeyond32BitsOfGroupsSplitInCoarserGroups) {
  // Up to 2^32 - 1 groups the caller's group is kept; from 2^32 groups on it doubles until the groups fit
  // 32 bits, and the parts tile the count in those coarser steps.
  EXPECT_EQ(coarse_group((std::uint64_t{1} << 32) - 1, 1), 1u);
  expect_tiling((std::uint64_t{1} << 32) - 1, 1, 3);
  for (std::uint64_t count : {std::uint64_t{1} << 32, (std::uint64_t{1} << 32) + 17, (std::uint64_t{1} << 36) + 5,
                              (std::uint64_t{1} << 40) + 123457})
    for (std::uint64_t group : {1, 16}) {  // count groups of `group` elements
      ASSERT_GT(coarse_group(count * group, group), group) << count;
      for (int parts : {2, 3, 128, 1000}) expect_tiling(count * group, group, parts);
    }
}

}  // namespace
