// Ordering and completion of a PE's own RMA: fence and quiet.
//   fence(h)  puts, p's and put_signals issued by the calling thread before it are delivered to each PE
//             before the ones after it (per destination PE, as OpenSHMEM fence).
//   quiet(h)  every put/p/put_signal/atomic issued by the calling thread before it is complete and
//             visible to every PE; every _nbi get has landed.
// The scope forms make each thread of the scope fence its own operations and then meet, so on return
// the guarantee covers the operations of the whole scope. Grid scope covers the calling CTA.
#pragma once

#include <cuda/atomic>

#include "shoal/dev/detail/proxy.cuh"
#include "shoal/dev/scope.cuh"
#include "shoal/device_handle.hpp"

namespace shoal {

// Over load/store transports each is one system-scope fence. fence only has to order the caller's
// stores (a release fence does); quiet must also complete them, which the sequentially consistent fence
// does by waiting for every outstanding store. Requests to other nodes need no fence (the proxy applies
// them to each peer in order); quiet waits until every request this PE posted before it is complete.
__device__ inline void fence(const device_handle&) {
  cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_system);
}
__device__ inline void quiet(const device_handle& h) {
  cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_system);
  detail::proxy_quiet(h);
}

template <typename Scope>
__device__ inline void fence(Scope, const device_handle& h) {
  fence(h);
  Scope::sync();
}

template <typename Scope>
__device__ inline void quiet(Scope, const device_handle& h) {
  quiet(h);
  Scope::sync();
}

}  // namespace shoal
