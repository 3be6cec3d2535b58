// What a kernel needs to hand requests to its PE's proxy thread: the ring and the owner map of the
// ring's result slots. The world keeps one in device memory when the job spans nodes (or emulated nodes)
// and the device handle points at it; kernels read it through that pointer. docs/proxy-design.md.
#pragma once

#include <cstdint>
#include <type_traits>

#include "shoal/detail/proxy_ring.hpp"

namespace shoal::detail {

struct proxy_channel {
  proxy_ring_view ring;
  // Device memory, ring.result_slots bits: bit s is set while some thread owns result slot s (between
  // posting a fetching atomic and reading its old value). Taken and returned with atomicOr/atomicAnd.
  std::uint32_t* result_owners = nullptr;
};
static_assert(std::is_trivially_copyable_v<proxy_channel>);

}  // namespace shoal::detail
