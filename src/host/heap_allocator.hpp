// Offsets inside one PE's symmetric heap. Pure bookkeeping, no CUDA: every PE runs the same sequence of
// calls on its own copy, so the same calls in the same order give the same offsets everywhere.
// First fit at the lowest address, with neighbours coalesced on release.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace shoal::detail {

class heap_allocator {
 public:
  explicit heap_allocator(std::uint64_t capacity);

  // The lowest offset aligned to `alignment` (a power of two) with `size` free bytes after it, or
  // nullopt if none fits in the current capacity. size 0 is not an allocation (callers return null).
  std::optional<std::uint64_t> allocate(std::uint64_t size, std::uint64_t alignment);

  // Capacity needed for allocate(size, alignment) to succeed once the heap is grown to it; UINT64_MAX when
  // that does not fit in 64 bits (a size near SIZE_MAX), which no heap can grow to.
  std::uint64_t capacity_needed(std::uint64_t size, std::uint64_t alignment) const;

  // Frees the allocation starting at `offset`; returns its size, or nullopt when no allocation starts
  // there (a double free or a foreign pointer), leaving the state unchanged.
  std::optional<std::uint64_t> release(std::uint64_t offset);

  // Adds [capacity(), new_capacity) to the free space; new_capacity must not shrink the heap.
  void grow(std::uint64_t new_capacity);

  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t used() const { return used_; }
  std::uint64_t largest_free() const;
  std::size_t live_allocations() const { return live_.size(); }
  // Size of the live allocation that contains `offset`, with its start; nullopt if none.
  std::optional<std::pair<std::uint64_t, std::uint64_t>> find(std::uint64_t offset) const;

 private:
  void insert_free(std::uint64_t offset, std::uint64_t size);  // coalesces with neighbours

  std::uint64_t capacity_;
  std::uint64_t used_ = 0;
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> size, disjoint, never adjacent
  std::map<std::uint64_t, std::uint64_t> live_;  // offset -> size
};

}  // namespace shoal::detail
