// The heap's offset allocator against a brute-force model: random allocate/free/grow sequences must
// give exactly the model's lowest-address first-fit offsets, never overlap, and coalesce fully.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "host/heap_allocator.hpp"
#include "shoal/device_handle.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

// One flag per byte; the lowest aligned start with `size` free bytes.
struct byte_model {
  std::vector<bool> used;
  explicit byte_model(std::size_t capacity) : used(capacity, false) {}
  std::optional<std::uint64_t> allocate(std::uint64_t size, std::uint64_t alignment) {
    for (std::uint64_t start = 0; start + size <= used.size(); start += alignment) {
      bool free = true;
      for (std::uint64_t i = start; i < start + size && free; ++i) free = !used[i];
      if (free) {
        for (std::uint64_t i = start; i < start + size; ++i) used[i] = true;
        return start;
      }
    }
    return std::nullopt;
  }
  void release(std::uint64_t start, std::uint64_t size) {
    for (std::uint64_t i = start; i < start + size; ++i) used[i] = false;
  }
};

TEST(HeapAllocator, RandomSequencesMatchModel) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::uint64_t capacity = 4096;
    heap_allocator allocator(capacity);
    byte_model model(capacity);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> live;
    for (int step = 0; step < 400; ++step) {
      int action = rng() % 10;
      if (action < 6) {
        std::uint64_t size = 1 + rng() % 300;
        std::uint64_t alignment = 1ull << (rng() % 8);
        auto got = allocator.allocate(size, alignment);
        auto want = model.allocate(size, alignment);
        ASSERT_EQ(got, want) << "seed " << seed << " step " << step;
        if (got) live.emplace_back(*got, size);
      } else if (action < 9 && !live.empty()) {
        std::size_t pick = rng() % live.size();
        auto [offset, size] = live[pick];
        ASSERT_EQ(allocator.release(offset), std::optional<std::uint64_t>(size));
        model.release(offset, size);
        live.erase(live.begin() + pick);
      } else if (action == 9 && capacity < 16384) {
        capacity += 512;
        allocator.grow(capacity);
        model.used.resize(capacity, false);
      }
      std::uint64_t used = 0;
      for (auto [o, s] : live) used += s;
      ASSERT_EQ(allocator.used(), used);
      ASSERT_EQ(allocator.live_allocations(), live.size());
    }
    for (auto [offset, size] : live) ASSERT_TRUE(allocator.release(offset));
    EXPECT_EQ(allocator.used(), 0u);
    EXPECT_EQ(allocator.largest_free(), capacity) << "free blocks did not coalesce";
  }
}

TEST(HeapAllocator, SameCallsSameOffsets) {
  heap_allocator a(1 << 20), b(1 << 20);
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::uint64_t size = 1 + rng() % 5000;
    EXPECT_EQ(a.allocate(size, 256), b.allocate(size, 256));
  }
}

TEST(HeapAllocator, RejectsDoubleAndForeignFrees) {
  heap_allocator a(1 << 16);
  auto p = a.allocate(100, 64);
  ASSERT_TRUE(p);
  EXPECT_EQ(a.release(*p + 1), std::nullopt);  // not the start of an allocation
  EXPECT_EQ(a.release(*p), std::optional<std::uint64_t>(100));
  EXPECT_EQ(a.release(*p), std::nullopt);  // double free
  EXPECT_EQ(a.used(), 0u);
}

TEST(HeapAllocator, GrowthNeededIsExactAndZeroSizeIsNoAllocation) {
  heap_allocator a(1000);
  EXPECT_EQ(a.allocate(0, 16), std::nullopt);
  ASSERT_TRUE(a.allocate(900, 1));
  EXPECT_EQ(a.allocate(500, 256), std::nullopt);
  std::uint64_t needed = a.capacity_needed(500, 256);
  EXPECT_EQ(needed, 1024u + 500u);
  a.grow(needed);
  EXPECT_EQ(a.allocate(500, 256), std::optional<std::uint64_t>(1024));
  EXPECT_THROW(a.grow(10), shoal::error);
}

// A size near 2^64 (malloc(SIZE_MAX), a negative count converted) must ask for more than any heap can grow
// to. Wrapped, the capacity was small: the heap grew nothing, the allocation still failed, and malloc
// reported an internal error instead of running out of memory.
TEST(HeapAllocator, CapacityNeededSaturatesInsteadOfWrapping) {
  heap_allocator a(1 << 20);
  ASSERT_TRUE(a.allocate(100, 256));  // the trailing free block starts at 100, as after init's own words
  EXPECT_EQ(a.capacity_needed(UINT64_MAX, 256), UINT64_MAX);
  EXPECT_EQ(a.capacity_needed(UINT64_MAX - 200, 256), UINT64_MAX);
  EXPECT_EQ(a.capacity_needed(100, std::uint64_t{1} << 63), (std::uint64_t{1} << 63) + 100);
  EXPECT_EQ(a.allocate(UINT64_MAX, 256), std::nullopt);
  EXPECT_EQ(a.used(), 100u);
}

TEST(HeapAllocator, FindLocatesContainingAllocation) {
  heap_allocator a(4096);
  auto p = a.allocate(128, 128);
  ASSERT_TRUE(p);
  auto hit = a.find(*p + 127);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->first, *p);
  EXPECT_EQ(hit->second, 128u);
  EXPECT_FALSE(a.find(*p + 128));
}

TEST(DeviceHandle, IsASmallTriviallyCopyableKernelArgument) {
  EXPECT_TRUE(std::is_trivially_copyable_v<shoal::device_handle>);
  EXPECT_LE(sizeof(shoal::device_handle), 128u);
  shoal::device_handle h;
  EXPECT_EQ(h.pe, -1);
  EXPECT_EQ(h.heap_base, nullptr);
}

}  // namespace
}  // namespace shoal::detail
