// How the two-member copy-engine reductions cut a buffer (coll/pair_chunks.hpp): the parts tile the range
// in order with every inner edge on 16 bytes, halves then chunks keep that, and the chunk count follows
// the larger share. The GPU tests check the data those cuts move; these check the cuts in CI.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "coll/pair_chunks.hpp"

namespace shoal::detail {
namespace {

// Checks that parts 0..parts-1 of [0, count) tile it in order, with inner edges on `grain`.
void expect_tiling(std::size_t count, std::size_t grain, std::size_t parts) {
  std::size_t at = 0;
  for (std::size_t p = 0; p < parts; ++p) {
    const element_span s = split_on_grain(count, grain, p, parts);
    ASSERT_EQ(s.first, at) << "count " << count << " grain " << grain << " part " << p << " of " << parts;
    ASSERT_LE(s.first, s.last);
    if (s.last != count) {
      ASSERT_EQ(s.last % grain, 0u) << "an inner edge off the 16-byte grid";
    }
    // No part is much larger than its fair share: the cut only rounds to the grain.
    ASSERT_LE(s.size(), (count + parts - 1) / parts + grain);
    at = s.last;
  }
  EXPECT_EQ(at, count) << "the parts do not reach the end";
}

TEST(PairChunks, PartsTileTheRangeOnTheGrain) {
  for (std::size_t grain : {1, 2, 4, 8, 16})
    for (std::size_t parts : {1, 2, 3, 7, 16})
      for (std::size_t count = 0; count < 300; ++count) expect_tiling(count, grain, parts);
  std::mt19937_64 rng(29);
  for (int i = 0; i < 200; ++i) {
    const std::size_t count = rng() % (std::size_t{1} << 34);
    expect_tiling(count, std::size_t{1} << (rng() % 5), 1 + rng() % 16);
  }
}

// An all-reduce cuts halves, then each half into chunks: every chunk starts on the grid of the whole
// buffer, and both members, which compute the chunk count from the larger half, agree on it.
TEST(PairChunks, ChunksOfHalvesStayOnTheGrid) {
  std::mt19937_64 rng(30);
  for (int i = 0; i < 300; ++i) {
    const std::size_t element_bytes = std::size_t{1} << (rng() % 4);
    const std::size_t grain = grain_of(element_bytes);
    const std::size_t count = i < 100 ? std::size_t(i) : rng() % (std::size_t{3} << 28);
    const element_span half[2] = {split_on_grain(count, grain, 0, 2), split_on_grain(count, grain, 1, 2)};
    ASSERT_EQ(half[0].last, half[1].first);
    const std::size_t larger = std::max(half[0].size(), half[1].size()) * element_bytes;
    const std::size_t chunks = pair_chunks(larger);
    for (const element_span& h : half) {
      std::size_t at = h.first;
      for (std::size_t k = 0; k < chunks; ++k) {
        const element_span c = split_on_grain(h.size(), grain, k, chunks);
        ASSERT_EQ(h.first + c.first, at);
        if (h.first + c.last != count) {
          ASSERT_EQ((h.first + c.last) % grain, 0u);
        }
        at = h.first + c.last;
      }
      ASSERT_EQ(at, h.last);
    }
  }
}

TEST(PairChunks, OneChunkPerSixteenMiBUpToSixteen) {
  EXPECT_EQ(pair_chunks(0), 1u);
  EXPECT_EQ(pair_chunks(1), 1u);
  EXPECT_EQ(pair_chunks(kPairChunkBytes), 1u);
  EXPECT_EQ(pair_chunks(kPairChunkBytes + 1), 2u);
  EXPECT_EQ(pair_chunks(std::size_t{128} << 20), 8u);
  EXPECT_EQ(pair_chunks(std::size_t{256} << 20), kMaxPairChunks);
  EXPECT_EQ(pair_chunks(std::size_t{1} << 40), kMaxPairChunks);
  EXPECT_EQ(grain_of(1), 16u);
  EXPECT_EQ(grain_of(2), 8u);
  EXPECT_EQ(grain_of(8), 2u);
  EXPECT_EQ(grain_of(32), 1u);
}

}  // namespace
}  // namespace shoal::detail
