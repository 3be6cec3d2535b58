// shoal::device_handle: everything a kernel needs to reach the symmetric heap of every PE, as one
// trivially copyable struct passed to kernels by value (no __device__ globals, no -rdc, no device link).
// Take it from shoal::world::device_handle() after init. A handle taken before a heap growth stays valid:
// addresses are checked (SHOAL_DEBUG) against what is mapped now (sync_state::heap_mapped_bytes), not
// against the handle's own heap_capacity.
// Compiles with a plain host compiler; the functions that use it are in shoal/device.cuh.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace shoal {

namespace detail {
struct proxy_channel;  // shoal/detail/proxy_channel.hpp
// Internal synchronization words of one PE, at the same heap offset on every PE (allocated by init,
// src/host/world.cpp).
struct sync_state {
  std::uint64_t device_barrier_epoch;  // device barriers this PE has completed (kernel and graph forms)
  std::uint64_t grid_meetings;         // grid_sync of this PE's running kernel: completed meetings << 32 |
                                       // CTAs arrived at the current one
  std::uint64_t stream_barrier_epoch;  // barrier_all_on_stream calls this PE has completed
  std::uint64_t heap_mapped_bytes;     // bytes of this PE's heap slot mapped now: written by the host at init
                                       // and at every growth; read by the SHOAL_DEBUG address checks
  std::uint64_t reserved[4];
};
// User buffers registered with world::register_buffer: reached through this table, since they do not
// lie in the heap's slots. The table lives in device memory at a fixed address; register and unregister
// rewrite it (between kernels that use it).
struct registered_buffer {
  std::byte* base;  // this PE's buffer
  std::uint64_t bytes;
  std::byte* const* peers;  // device array [local_size]: each node-local PE's buffer, mapped here
};
struct registration_table {
  static constexpr int kCapacity = 64;
  std::int32_t count;
  registered_buffer entries[kCapacity];
};
}  // namespace detail

struct device_handle {
  std::byte* heap_base = nullptr;   // this PE's heap slot in this process's address space
  std::uint64_t heap_capacity = 0;  // bytes mapped per PE when the handle was taken
  std::int64_t slot_stride = 0;     // bytes between the heap slots of adjacent node-local PEs
  std::int32_t pe = -1;
  std::int32_t n_pes = 0;
  std::int32_t local_pe = 0;  // index of this PE among its node's PEs
  std::int32_t local_size = 1;
  std::int32_t node_first_pe = 0;  // when node_contiguous, PE p has local index p - node_first_pe
  std::int32_t node_contiguous = 1;
  const std::int32_t* local_index = nullptr;               // device array [n_pes]: node-local index of each PE, or -1
  detail::sync_state* sync = nullptr;                      // this PE's sync words (symmetric)
  std::uint64_t* device_barrier_flags = nullptr;           // [n_pes], symmetric: flag p is written by PE p
  std::uint64_t wait_timeout_ns = 0;                       // spin-waits trap after this long; 0 = wait forever
  const detail::registration_table* registered = nullptr;  // user buffers (world::register_buffer)
  // The proxy of this PE (device memory) when some PE is on another node, else null: RMA, signals and
  // atomics to PEs that ptr() cannot reach go through it (shoal/dev/detail/proxy.cuh).
  const detail::proxy_channel* proxy = nullptr;
};

static_assert(std::is_trivially_copyable_v<device_handle>, "kernels take the handle by value");
static_assert(sizeof(device_handle) <= 128, "keep the handle small: it is a kernel argument");

}  // namespace shoal
