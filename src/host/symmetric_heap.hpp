// The symmetric heap's memory: one virtual range per process with a slot per node-local PE, physical
// chunks committed with CUDA VMM, exported as POSIX file descriptors, passed to node-local peers through
// the bootstrap and mapped into their slots. Slot i of every process maps node-local PE i's memory, so
//   remote address = local address + (peer's local index - mine) * slot_stride
// is one add on the device. Offset bookkeeping lives in heap_allocator; this class only maps memory.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "shoal/bootstrap.hpp"

namespace shoal::detail {

struct heap_layout {
  std::uint64_t initial_size;  // committed at construction (rounded up to whole chunks)
  std::uint64_t max_size;      // virtual space per slot; growth stops here
  std::uint64_t chunk_size;    // growth granule (rounded up to the GPU's allocation granularity)
};

class symmetric_heap {
 public:
  // Collective over all PEs (they exchange failure status; fds move among node-local PEs only).
  symmetric_heap(shoal::bootstrap& boot, int device, heap_layout layout);
  ~symmetric_heap();
  symmetric_heap(const symmetric_heap&) = delete;
  symmetric_heap& operator=(const symmetric_heap&) = delete;

  std::byte* base() const { return slot(boot_.local_pe()); }
  std::byte* slot(int local_pe) const {
    return reinterpret_cast<std::byte*>(reservation_) + std::uint64_t(local_pe) * stride_;
  }
  std::int64_t slot_stride() const { return std::int64_t(stride_); }
  std::uint64_t mapped() const { return mapped_; }
  std::uint64_t max_size() const { return stride_; }
  std::uint64_t chunk_size() const { return chunk_size_; }
  // The largest alignment every PE's slot start is sure to have: the reservation's (the GPU's granularity) and
  // the stride's lowest set bit, whichever is less. An offset so aligned is aligned on every PE.
  std::uint64_t alignment() const {
    const std::uint64_t stride_bit = stride_ & (~stride_ + 1);
    return stride_bit != 0 && stride_bit < granularity_ ? stride_bit : granularity_;
  }

  // Collective over all PEs with the same `bytes`: maps whole chunks until at least `bytes` per PE are
  // mapped. Throws shoal::error on every PE when any PE cannot commit, map, pass or import the new chunks
  // (errc::out_of_memory when memory ran out or `bytes` exceeds max_size()); then no PE's heap has grown,
  // nothing stays mapped or queued, and a later growth starts afresh.
  void grow_to(std::uint64_t bytes);
  // grow_to calls `listener` with the new mapped() once this PE has mapped its chunks and before any PE on
  // another node can address them (the proxy checks peers' requests against it). One listener.
  void on_growth(std::function<void(std::uint64_t mapped)> listener) { on_growth_ = std::move(listener); }

 private:
  struct mapping {
    CUdeviceptr address;
    std::size_t size;
    CUmemGenericAllocationHandle handle;
  };

  void release_all() noexcept;
  // Maps `handle` (which it takes: released here if the mapping fails, else by mappings_) at `address`.
  void map_and_enable(CUmemGenericAllocationHandle handle, CUdeviceptr address);
  // Unmaps and releases the mappings from `first_new_mapping` on and the handles left in `unmapped_own`.
  void undo_growth(std::size_t first_new_mapping, std::vector<CUmemGenericAllocationHandle>& unmapped_own) noexcept;

  shoal::bootstrap& boot_;
  int device_;
  std::uint64_t granularity_ = 0;
  std::uint64_t chunk_size_ = 0;
  std::uint64_t stride_ = 0;
  std::uint64_t mapped_ = 0;
  CUdeviceptr reservation_ = 0;
  std::vector<mapping> mappings_;
  std::function<void(std::uint64_t)> on_growth_;
};

}  // namespace shoal::detail
