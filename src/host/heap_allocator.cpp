#include "host/heap_allocator.hpp"

#include <algorithm>

#include "shoal/error.hpp"

namespace shoal::detail {
namespace {
std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}
}  // namespace

heap_allocator::heap_allocator(std::uint64_t capacity) : capacity_(capacity) {
  if (capacity > 0) free_.emplace(0, capacity);
}

std::optional<std::uint64_t> heap_allocator::allocate(std::uint64_t size, std::uint64_t alignment) {
  if (size == 0 || alignment == 0 || (alignment & (alignment - 1)) != 0) return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    auto [start, length] = *it;
    std::uint64_t aligned = align_up(start, alignment);
    if (aligned < start || aligned - start > length || length - (aligned - start) < size) continue;
    free_.erase(it);
    if (aligned > start) free_.emplace(start, aligned - start);
    std::uint64_t end = aligned + size;
    if (end < start + length) free_.emplace(end, start + length - end);
    live_.emplace(aligned, size);
    used_ += size;
    return aligned;
  }
  return std::nullopt;
}

std::uint64_t heap_allocator::capacity_needed(std::uint64_t size, std::uint64_t alignment) const {
  // The allocation would go at the end: into the trailing free block if there is one, else at capacity.
  std::uint64_t start = capacity_;
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (last->first + last->second == capacity_) start = last->first;
  }
  // Saturated, not wrapped: a wrapped sum is a small capacity the heap already has, and the caller would
  // grow nothing and find the allocation still failing (an internal error instead of out of memory).
  const std::uint64_t aligned = align_up(start, alignment);
  if (aligned < start || size > UINT64_MAX - aligned) return UINT64_MAX;
  return aligned + size;
}

std::optional<std::uint64_t> heap_allocator::release(std::uint64_t offset) {
  auto it = live_.find(offset);
  if (it == live_.end()) return std::nullopt;
  std::uint64_t size = it->second;
  live_.erase(it);
  used_ -= size;
  insert_free(offset, size);
  return size;
}

void heap_allocator::grow(std::uint64_t new_capacity) {
  if (new_capacity < capacity_) throw error(errc::internal, "heap_allocator::grow", "the heap never shrinks");
  if (new_capacity == capacity_) return;
  std::uint64_t old = capacity_;
  capacity_ = new_capacity;
  insert_free(old, new_capacity - old);
}

std::uint64_t heap_allocator::largest_free() const {
  std::uint64_t best = 0;
  for (auto [offset, size] : free_) best = std::max(best, size);
  return best;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> heap_allocator::find(std::uint64_t offset) const {
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return std::nullopt;
  --it;
  if (offset - it->first >= it->second) return std::nullopt;
  return std::pair{it->first, it->second};
}

void heap_allocator::insert_free(std::uint64_t offset, std::uint64_t size) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_.emplace(offset, size);
}

}  // namespace shoal::detail
