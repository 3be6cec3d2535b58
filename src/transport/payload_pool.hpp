// A fixed set of equal buffers carved from one block of memory that the owner provides (pinned host memory
// for a GPU heap, ordinary memory in tests): what a local_memory lends for message payloads, so that the
// copy engines reach them without a staging copy (local_memory::lend). Single-threaded, like its owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace shoal::detail {

class payload_pool {
 public:
  payload_pool() = default;
  // `slots` buffers of `slot_bytes` each at [base, base + slots * slot_bytes); the caller owns the memory.
  payload_pool(std::byte* base, std::size_t slot_bytes, std::size_t slots)
      : base_(base), slot_bytes_(slot_bytes), slots_(slots) {
    free_.reserve(slots);
    for (std::size_t i = slots; i-- > 0;) free_.push_back(i);
  }

  std::size_t slot_bytes() const noexcept { return slot_bytes_; }
  std::size_t lent_out() const noexcept { return slots_ - free_.size(); }

  // A buffer of at least `bytes`, or null when `bytes` exceeds a slot or every slot is lent.
  std::byte* take(std::size_t bytes) {
    if (bytes > slot_bytes_ || free_.empty()) return nullptr;
    const std::size_t slot = free_.back();
    free_.pop_back();
    return base_ + slot * slot_bytes_;
  }

  // Carves the same size of buffers from `memory` instead (a payload window, which the caller owns): false,
  // and nothing changed, when this pool has no buffers, `memory` holds none, or a buffer is still lent.
  bool move_to(std::span<std::byte> memory) {
    if (slot_bytes_ == 0 || memory.size() < slot_bytes_ || lent_out() != 0) return false;
    *this = payload_pool(memory.data(), slot_bytes_, memory.size() / slot_bytes_);
    return true;
  }

  // `buffer` came from take() and is free again. Anything else is ignored (it is not ours).
  void give_back(const std::byte* buffer) {
    if (!owns(buffer)) return;
    free_.push_back(static_cast<std::size_t>(buffer - base_) / slot_bytes_);
  }

  // Whether `p` lies in one of this pool's buffers (lent or not).
  bool owns(const void* p) const noexcept {
    const auto* b = static_cast<const std::byte*>(p);
    return base_ != nullptr && b >= base_ && b < base_ + slots_ * slot_bytes_;
  }

 private:
  std::byte* base_ = nullptr;
  std::size_t slot_bytes_ = 0;
  std::size_t slots_ = 0;
  std::vector<std::size_t> free_;
};

}  // namespace shoal::detail
