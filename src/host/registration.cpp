// User buffers made symmetric: world::register_buffer / unregister_buffer (shoal/world.hpp). Each PE
// exports the CUDA allocation holding its buffer through CUDA IPC; node-local peers open it, and the
// mapping table kernels use (device_handle::registered) is rewritten on every change.
#include <fmt/format.h>

#include <algorithm>

#include "host/cuda_check.hpp"
#include "host/driver_api.hpp"
#include "host/world_impl.hpp"

namespace shoal {

const world::impl::registration* world::impl::registered(const void* p, std::size_t bytes) const {
  auto* b = static_cast<const std::byte*>(p);
  for (const registration& r : registrations)
    if (b >= r.base && std::uint64_t(b - r.base) <= r.bytes && bytes <= r.bytes - std::uint64_t(b - r.base)) return &r;
  return nullptr;
}

void world::impl::upload_registrations() {
  detail::registration_table table{};
  table.count = std::int32_t(registrations.size());
  for (std::size_t i = 0; i < registrations.size(); ++i)
    table.entries[i] = {registrations[i].base, registrations[i].bytes, registrations[i].device_peers};
  SHOAL_CUDA_CHECK(cudaMemcpy(registration_table, &table, sizeof(table), cudaMemcpyHostToDevice));
}

void world::register_buffer(void* p, std::size_t bytes) {
  impl& w = *impl_;
  const char* call = "shoal::world::register_buffer";
  w.require_device(call);
  if (p == nullptr || bytes == 0) throw error(errc::invalid_argument, call, "null pointer or zero size");
  if (w.registrations.size() >= std::size_t(detail::registration_table::kCapacity))
    throw error(errc::invalid_argument, call,
                fmt::format("{} buffers are registered already, the most there can be", w.registrations.size()));
  w.agree(impl::collective_kind::register_buffer, bytes, 0, call);

  // Each PE exports the allocation holding its buffer, with the buffer's offset inside it.
  struct exported {
    cudaIpcMemHandle_t handle;
    std::uint64_t offset;
  } mine{};
  CUdeviceptr allocation = 0;
  std::size_t allocation_size = 0;
  SHOAL_CU_CHECK(
      detail::driver().mem_get_address_range(&allocation, &allocation_size, reinterpret_cast<CUdeviceptr>(p)));
  SHOAL_CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, reinterpret_cast<void*>(allocation)));
  mine.offset = reinterpret_cast<CUdeviceptr>(p) - allocation;
  std::vector<exported> all(std::size_t(w.boot->n_pes()));
  w.boot->all_gather(&mine, all.data(), sizeof(exported));

  impl::registration r{static_cast<std::byte*>(p), bytes, {}, {}, nullptr};
  try {
    for (int pe : w.boot->node_pes()) {
      if (pe == w.boot->pe()) {
        r.peers.push_back(r.base);
        continue;
      }
      void* mapped = nullptr;
      SHOAL_CUDA_CHECK(cudaIpcOpenMemHandle(&mapped, all[pe].handle, cudaIpcMemLazyEnablePeerAccess));
      r.ipc_mappings.push_back(mapped);
      r.peers.push_back(static_cast<std::byte*>(mapped) + all[pe].offset);
    }
    SHOAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&r.device_peers), r.peers.size() * sizeof(std::byte*)));
    SHOAL_CUDA_CHECK(
        cudaMemcpy(r.device_peers, r.peers.data(), r.peers.size() * sizeof(std::byte*), cudaMemcpyHostToDevice));
  } catch (...) {
    for (void* m : r.ipc_mappings) SHOAL_CUDA_LOG(cudaIpcCloseMemHandle(m));
    if (r.device_peers) SHOAL_CUDA_LOG(cudaFree(r.device_peers));
    throw;
  }
  w.registrations.push_back(std::move(r));
  w.upload_registrations();
  w.boot->barrier();  // no PE writes into a peer's buffer before that peer has registered it
}

void world::unregister_buffer(void* p) {
  impl& w = *impl_;
  const char* call = "shoal::world::unregister_buffer";
  w.require_device(call);
  auto it = std::find_if(w.registrations.begin(), w.registrations.end(),
                         [&](const impl::registration& r) { return r.base == p; });
  if (it == w.registrations.end())
    throw error(errc::invalid_argument, call, fmt::format("{} is not the start of a registered buffer", p));
  SHOAL_CUDA_CHECK(cudaDeviceSynchronize());
  w.agree(impl::collective_kind::unregister_buffer, it->bytes, 0, call);
  for (void* m : it->ipc_mappings) SHOAL_CUDA_LOG(cudaIpcCloseMemHandle(m));
  SHOAL_CUDA_LOG(cudaFree(it->device_peers));
  w.registrations.erase(it);
  w.upload_registrations();
}

}  // namespace shoal
