// detail::spread_rank, where a block- or grid-scope bulk copy starts among the scope's threads: for any
// size and address it must be a rotation of the ranks by whole warps (every byte copied once; lanes stay in
// place where the size is a multiple of 32), and messages at a power-of-two stride must start on many warps.
// detail::may_have_share, the test by which an idle thread of such a copy returns at once: it must hold for
// every thread that copy_aligned's split gives a part, and free the rest.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "shoal/dev/detail/spread.hpp"

namespace {

using shoal::detail::may_have_share;
using shoal::detail::spread_rank;

const void* address(std::uint64_t a) { return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(a)); }

TEST(SpreadRank, IsAWarpAlignedPermutationForAnySizeAndAddress) {
  std::mt19937_64 rng(20261130);
  const unsigned sizes[] = {1, 31, 32, 33, 96, 100, 1024, 1000, 132 * 1024, 132 * 512 + 7};
  for (unsigned size : sizes) {
    for (int trial = 0; trial < 20; ++trial) {
      const std::uint64_t key = rng();
      std::vector<bool> seen(size, false);
      unsigned first = size;  // the rank that takes element 0
      for (unsigned rank = 0; rank < size; ++rank) {
        const unsigned r = spread_rank(rank, size, address(key));
        ASSERT_LT(r, size) << "size " << size << " key " << key;
        ASSERT_FALSE(seen[r]) << "rank " << r << " taken twice; size " << size << " key " << key;
        seen[r] = true;
        if (r == 0) first = rank;
      }
      ASSERT_EQ(first % 32, 0u) << "a copy must start on a whole warp; size " << size << " key " << key;
      for (unsigned rank = 0; rank < size; ++rank)
        ASSERT_EQ(spread_rank(rank, size, address(key)), (rank + size - first) % size) << "not a rotation";
    }
  }
}

// A grid-scope copy may have more than 2^31 threads: rank + size - first must not wrap in 32 bits.
// Checked on the ranks around every boundary of the rotation (a full pass would take minutes).
TEST(SpreadRank, StaysARotationAbove2To31Threads) {
  const unsigned size = 2200u << 20;  // 2 306 867 200 threads
  for (std::uint64_t key : {0x7f0000000060ull, 0x7f00deadbee0ull, 0x12345670ull}) {
    const std::uint64_t first = [&] {  // the rank that takes element 0, found by its warp
      for (std::uint64_t warp = 0; warp < size / 32; ++warp)
        if (spread_rank(unsigned(warp * 32), size, address(key)) == 0) return warp * 32;
      return std::uint64_t(size);
    }();
    ASSERT_LT(first, size) << "no rank takes element 0; key " << key;
    for (std::uint64_t around : {std::uint64_t(0), first, std::uint64_t(size) - first, std::uint64_t(size) - 1,
                                 std::uint64_t(1) << 31})
      for (std::uint64_t d = 0; d < 64; ++d) {
        const std::uint64_t rank = (around + size - 32 + d) % size;
        ASSERT_EQ(spread_rank(unsigned(rank), size, address(key)), (rank + size - first) % size)
            << "rank " << rank << " key " << key;
      }
  }
}

TEST(SpreadRank, StridedMessagesStartOnManyWarps) {
  // 64 messages 64 KiB apart (a ring of slots) in a block of 1024 threads (32 warps): starting them all on
  // warp 0, or on a few warps, would serialize them.
  for (std::uint64_t stride : {std::uint64_t(16), std::uint64_t(4096), std::uint64_t(65536), std::uint64_t(1) << 21}) {
    std::set<unsigned> starts;
    for (std::uint64_t k = 0; k < 64; ++k) {
      const std::uint64_t key = 0x7f0000000000ull + k * stride;
      for (unsigned rank = 0; rank < 1024; rank += 32)
        if (spread_rank(rank, 1024, address(key)) == 0) starts.insert(rank / 32);
    }
    EXPECT_GE(starts.size(), 24u) << "stride " << stride << ": messages start on too few of the 32 warps";
  }
}

// copy_aligned's split written out: whether `rank` copies any byte of `bytes` bytes in units of `unit`, the
// destination `offset` bytes past a unit boundary. Head and tail bytes go one per rank, units one per rank.
bool takes_part(std::size_t rank, std::size_t bytes, std::size_t unit, std::size_t offset) {
  std::size_t head = (unit - offset % unit) % unit;
  if (head > bytes) head = bytes;
  const std::size_t body = (bytes - head) / unit, tail = bytes - head - body * unit;
  return rank < head || rank < body || rank < tail;
}

TEST(SpreadRank, EveryThreadWithAPartMayHaveAShare) {
  for (std::size_t unit : {1, 2, 4, 8, 16})
    for (std::size_t offset = 0; offset < unit; ++offset)
      for (std::size_t bytes = 0; bytes <= 700; ++bytes)
        for (std::size_t rank = 0; rank < 800; ++rank) {
          if (!takes_part(rank, bytes, unit, offset)) continue;
          ASSERT_TRUE(may_have_share(rank, bytes, unit))
              << "rank " << rank << " copies part of " << bytes << " bytes in units of " << unit << " at offset "
              << offset << " but would return at once";
        }
}

TEST(SpreadRank, ASmallMessageFreesMostOfABlock) {
  // 2 KiB in 16-byte units: 128 of a block's 1024 threads have a part; the other 896 return at once.
  int busy = 0;
  for (std::size_t rank = 0; rank < 1024; ++rank) busy += may_have_share(rank, 2048, 16) ? 1 : 0;
  EXPECT_EQ(busy, 128);
}

}  // namespace
