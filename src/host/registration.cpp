// User buffers made symmetric: world::register_buffer / unregister_buffer (shoal/world.hpp). Each PE
// exports the CUDA allocation holding its buffer through CUDA IPC; node-local peers open it, and the
// mapping table kernels use (device_handle::registered) is rewritten on every change.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "bootstrap/pe_vote.hpp"
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

void world::impl::registration::close_mappings() noexcept {
  for (void* m : ipc_mappings) SHOAL_CUDA_LOG(cudaIpcCloseMemHandle(m));
  ipc_mappings.clear();
}

void world::impl::registration::release() noexcept {
  close_mappings();
  if (device_peers) SHOAL_CUDA_LOG(cudaFree(std::exchange(device_peers, nullptr)));
}

void world::impl::upload_registrations() {
  detail::registration_table table{};
  table.count = std::int32_t(registrations.size());
  for (std::size_t i = 0; i < registrations.size(); ++i)
    table.entries[i] = {registrations[i].base, registrations[i].bytes, registrations[i].device_peers};
  SHOAL_CUDA_CHECK(cudaMemcpy(registration_table, &table, sizeof(table), cudaMemcpyHostToDevice));
}

namespace {

// What each PE brings to a registration: its buffer's CUDA IPC handle and offset inside the allocation.
// Gathered from every PE with its vote before anything is opened, so a PE whose buffer is bad fails with
// the others instead of leaving them waiting.
struct registration_offer {
  cudaIpcMemHandle_t handle;
  std::uint64_t offset;
};

}  // namespace

void world::register_buffer(void* p, std::size_t bytes) {
  const char* call = "shoal::world::register_buffer";
  impl& w = live(call);
  w.require_device(call);
  if (w.registrations.size() >= std::size_t(detail::registration_table::kCapacity))
    throw error(errc::invalid_argument, call,
                fmt::format("{} buffers are registered already, the most there can be", w.registrations.size()));
  w.agree(impl::collective_kind::register_buffer, bytes, 0, call);

  // Each PE offers the allocation holding its buffer, with the buffer's offset inside it. The buffer
  // must lie inside that allocation: RMA checks addresses against [p, p + bytes), and a range past the
  // allocation's end would let them write into whatever memory follows it on the peers.
  registration_offer mine{};
  std::string why;
  CUdeviceptr allocation = 0;
  std::size_t allocation_size = 0;
  const auto address = reinterpret_cast<CUdeviceptr>(p);
  cudaPointerAttributes attributes{};
  if (p == nullptr || bytes == 0) {
    why = fmt::format("a null pointer or zero size ({}, {} bytes)", p, bytes);
  } else if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess || attributes.type != cudaMemoryTypeDevice) {
    (void)cudaGetLastError();
    why = fmt::format("{} is not in a CUDA device allocation", p);
  } else if (detail::driver().mem_get_address_range(&allocation, &allocation_size, address) != CUDA_SUCCESS) {
    why = fmt::format("{} is not in a CUDA device allocation", p);
  } else if (bytes > allocation_size - (address - allocation)) {
    why = fmt::format("[{}, +{} bytes) runs past the end of its CUDA allocation ({} bytes from {:#x})", p, bytes,
                      allocation_size, allocation);
  } else if (const cudaError_t e = cudaIpcGetMemHandle(&mine.handle, reinterpret_cast<void*>(allocation));
             e != cudaSuccess) {
    (void)cudaGetLastError();
    why = fmt::format(
        "cudaIpcGetMemHandle refused {} ({}): memory from cudaMalloc or a pool allocator that "
        "exports it can be registered",
        p, cudaGetErrorString(e));
  } else {
    mine.offset = address - allocation;
  }
  const std::exception_ptr refused =
      why.empty() ? nullptr
                  : std::make_exception_ptr(error(errc::invalid_argument, call, why + "; no PE registered it"));
  const std::vector<registration_offer> all =
      detail::all_gather_unless_any_pe_failed(*w.boot, mine, refused, call, "register its buffer");
  // A registered object lies at the same offset in every PE's buffer, so the buffers must start alike aligned:
  // else a word aligned here is misaligned on a peer, and an atomic or signal there faults and takes the CUDA
  // context with it. (Allocations start 256-byte aligned, so the offsets tell.) Judged from the gathered offers,
  // so every PE refuses alike.
  constexpr std::uint64_t kAlignment = 256;
  for (std::size_t pe = 1; pe < all.size(); ++pe)
    if (all[pe].offset % kAlignment != all[0].offset % kAlignment)
      throw error(errc::invalid_argument, call,
                  fmt::format("PE {}'s buffer starts {} bytes past a {}-byte boundary and PE 0's {}: an object "
                              "would be aligned differently on the two; register buffers that start alike "
                              "aligned (as cudaMalloc returns them); no PE registered it",
                              pe, all[pe].offset % kAlignment, kAlignment, all[0].offset % kAlignment));

  // Every PE registers the buffer or none does: the tables that kernels read stay alike everywhere. Each PE
  // uploads its new table before the vote, so nothing after it can fail on one PE alone; and the vote orders
  // every PE's upload before any PE returns, so no PE writes into a peer's buffer before that peer has
  // registered it.
  impl::registration r{static_cast<std::byte*>(p), bytes, {}, {}, nullptr};
  bool listed = false;
  try {
    detail::run_on_every_pe(*w.boot, call, "map its peers' buffers", [&] {
      for (int pe : w.boot->node_pes()) {
        if (pe == w.boot->pe()) {
          r.peers.push_back(r.base);
          continue;
        }
        void* mapped = nullptr;
        SHOAL_CUDA_CHECK(cudaIpcOpenMemHandle(&mapped, all[std::size_t(pe)].handle, cudaIpcMemLazyEnablePeerAccess));
        r.ipc_mappings.push_back(mapped);
        r.peers.push_back(static_cast<std::byte*>(mapped) + all[std::size_t(pe)].offset);
      }
      SHOAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&r.device_peers), r.peers.size() * sizeof(std::byte*)));
      SHOAL_CUDA_CHECK(
          cudaMemcpy(r.device_peers, r.peers.data(), r.peers.size() * sizeof(std::byte*), cudaMemcpyHostToDevice));
      w.registrations.push_back(r);
      listed = true;
      w.upload_registrations();
    });
  } catch (...) {
    if (listed) {
      w.registrations.pop_back();
      try {
        w.upload_registrations();  // the table as it was
      } catch (const std::exception& e) {
        SHOAL_LOG_ERROR(heap, "{}: restoring the registration table failed: {}", call, e.what());
      }
    }
    r.release();
    throw;
  }
}

void world::unregister_buffer(void* p) {
  const char* call = "shoal::world::unregister_buffer";
  impl& w = live(call);
  w.require_device(call);
  auto it = std::find_if(w.registrations.begin(), w.registrations.end(),
                         [&](const impl::registration& r) { return r.base == p; });
  // No kernel may still use the buffer when the peers close their mappings of it; a failure goes into the
  // agreement, which fails on every PE.
  const std::exception_ptr unfinished = detail::failure_of([] { SHOAL_CUDA_CHECK(cudaDeviceSynchronize()); });
  // The tables are alike on every PE, so every PE names the same entry, or the call is mismatched; a
  // pointer that is not registered anywhere fails on every PE alike.
  const std::uint64_t entry =
      it == w.registrations.end() ? ~std::uint64_t{0} : std::uint64_t(it - w.registrations.begin());
  w.agree(impl::collective_kind::unregister_buffer, entry, 0, call, unfinished);
  if (it == w.registrations.end())
    throw error(errc::invalid_argument, call, fmt::format("{} is not the start of a registered buffer", p));
  it->release();
  w.registrations.erase(it);
  // The vote orders every peer's closing of its mapping of this PE's buffer before the return: the caller may
  // free it. A PE whose upload failed fails the call on every PE rather than leaving them waiting.
  detail::run_on_every_pe(*w.boot, call, "upload its registration table", [&] { w.upload_registrations(); });
}

}  // namespace shoal
