#include "host/symmetric_heap.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "base/log.hpp"
#include "bootstrap/pe_vote.hpp"
#include "host/cuda_check.hpp"
#include "host/driver_api.hpp"

namespace shoal::detail {
namespace {

std::uint64_t round_up(std::uint64_t value, std::uint64_t granule) { return (value + granule - 1) / granule * granule; }

// Chunks whose descriptors one exchange between node-local PEs carries (grow_to). Each of a node's L PEs
// holds its own batch and, once received, every peer's (L x 16 descriptors open), and L (L - 1) x 16 are in
// flight between them, which Linux also counts against the user's limit of open files.
constexpr std::size_t kChunksPerExchange = 16;

CUmemAllocationProp chunk_properties(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// Closes descriptors on every path out of a scope.
struct fd_list {
  std::vector<int> fds;
  ~fd_list() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
};

}  // namespace

symmetric_heap::symmetric_heap(shoal::bootstrap& boot, int device, heap_layout layout) : boot_(boot), device_(device) {
  const driver_api& cu = driver();
  int vmm = 0, fd_handles = 0;
  SHOAL_CU_CHECK(cu.device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device));
  SHOAL_CU_CHECK(
      cu.device_get_attribute(&fd_handles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device));
  if (!vmm || !fd_handles)
    throw error(errc::unsupported, "symmetric heap",
                fmt::format("GPU {} lacks CUDA virtual memory management or POSIX-fd export", device));

  CUmemAllocationProp prop = chunk_properties(device);
  std::size_t granularity = 0;
  SHOAL_CU_CHECK(cu.mem_get_allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  granularity_ = granularity;
  chunk_size_ = round_up(layout.chunk_size, granularity_);
  stride_ = round_up(std::max(layout.max_size, layout.initial_size), chunk_size_);
  if (stride_ > layout.max_size)
    SHOAL_LOG_WARN(heap,
                   "the heap may grow to {} MiB per PE, past SHOAL_HEAP_MAX_SIZE ({} MiB): it holds at least "
                   "SHOAL_HEAP_SIZE ({} MiB) in whole chunks of {} MiB (SHOAL_HEAP_CHUNK_SIZE, rounded up to the GPU's "
                   "granularity)",
                   stride_ >> 20, layout.max_size >> 20, layout.initial_size >> 20, chunk_size_ >> 20);

  std::uint64_t total = stride_ * std::uint64_t(boot_.local_size());
  SHOAL_CU_CHECK(cu.mem_address_reserve(&reservation_, total, granularity_, 0, 0));
  SHOAL_LOG_INFO(heap, "reserved {} GiB of address space: {} slots of {} GiB, chunks of {} MiB", total >> 30,
                 boot_.local_size(), stride_ >> 30, chunk_size_ >> 20);
  try {
    grow_to(layout.initial_size);
  } catch (...) {
    release_all();
    throw;
  }
}

symmetric_heap::~symmetric_heap() { release_all(); }

void symmetric_heap::release_all() noexcept {
  const driver_api* cu = nullptr;
  try {
    cu = &driver();
  } catch (...) {
    return;
  }
  for (auto it = mappings_.rbegin(); it != mappings_.rend(); ++it) {
    cu->mem_unmap(it->address, it->size);
    cu->mem_release(it->handle);
  }
  mappings_.clear();
  if (reservation_ != 0) cu->mem_address_free(reservation_, stride_ * std::uint64_t(boot_.local_size()));
  reservation_ = 0;
}

void symmetric_heap::map_and_enable(CUmemGenericAllocationHandle handle, CUdeviceptr address) {
  const driver_api& cu = driver();
  if (const CUresult status = cu.mem_map(address, chunk_size_, 0, handle, 0); status != CUDA_SUCCESS) {
    cu.mem_release(handle);
    SHOAL_CU_CHECK(status);
  }
  mappings_.push_back({address, chunk_size_, handle});
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  SHOAL_CU_CHECK(cu.mem_set_access(address, chunk_size_, &access, 1));
}

void symmetric_heap::undo_growth(std::size_t first_new_mapping,
                                 std::vector<CUmemGenericAllocationHandle>& unmapped_own) noexcept {
  const driver_api& cu = driver();
  while (mappings_.size() > first_new_mapping) {
    cu.mem_unmap(mappings_.back().address, mappings_.back().size);
    cu.mem_release(mappings_.back().handle);
    mappings_.pop_back();
  }
  for (CUmemGenericAllocationHandle& handle : unmapped_own)
    if (handle != 0) cu.mem_release(std::exchange(handle, 0));
}

void symmetric_heap::grow_to(std::uint64_t bytes) {
  const driver_api& cu = driver();
  if (bytes > stride_)
    throw error(
        errc::out_of_memory, "symmetric heap",
        fmt::format("{} bytes per PE asked for; the heap may grow to {} (SHOAL_HEAP_MAX_SIZE)", bytes, stride_));
  std::uint64_t target = round_up(bytes, chunk_size_);
  if (target <= mapped_) return;
  std::size_t n_chunks = (target - mapped_) / chunk_size_;

  // Until every PE has mapped every new chunk, the growth can be undone: the mappings past
  // first_new_mapping, and this PE's chunks not mapped yet (`created`; an entry is zeroed once its
  // mapping owns it). Each step that can fail on one PE ends in a vote, and a no undoes the growth on
  // every PE, so that all PEs keep the same mapped() and no descriptor is left queued for a later growth.
  const std::size_t first_new_mapping = mappings_.size();
  std::vector<CUmemGenericAllocationHandle> created(n_chunks, 0);
  std::string failure;  // this PE's, for its own error
  errc category = errc::out_of_memory;
  auto settle = [&](const char* step) {
    const int first_failed = first_pe_voting_no(boot_, failure.empty());
    if (first_failed < 0) return;
    undo_growth(first_new_mapping, created);
    const bool mine = !failure.empty();  // then this PE reports its own failure, whoever failed first
    throw error(mine ? category : errc::out_of_memory, "symmetric heap",
                fmt::format("growing from {} to {} MiB per PE: PE {} could not {}: {}; no PE's heap grew",
                            mapped_ >> 20, target >> 20, mine ? boot_.pe() : first_failed, step,
                            mine ? failure : "its own error says why"));
  };
  auto note_failure = [&](const std::exception& e) {
    if (!failure.empty()) return;
    failure = e.what();
    const auto* own = dynamic_cast<const error*>(&e);
    category = own ? own->category() : errc::internal;
  };

  // 1. Commit this PE's new chunks.
  CUmemAllocationProp prop = chunk_properties(device_);
  for (std::size_t i = 0; i < n_chunks && failure.empty(); ++i) {
    CUresult status = cu.mem_create(&created[i], chunk_size_, &prop, 0);
    if (status != CUDA_SUCCESS) {
      created[i] = 0;
      const char* text = "?";
      cu.get_error_string(status, &text);
      failure = text;
    }
  }
  settle("commit that much more GPU memory");

  // 2–3. Batch by batch of chunks: map mine into my slot and export them; then pass the descriptors to
  //      every node-local peer, and import each peer's into that peer's slot. A batch bounds the
  //      descriptors open and in flight at once (kChunksPerExchange): a growth by hundreds of chunks (a
  //      small SHOAL_HEAP_CHUNK_SIZE, a large malloc) would otherwise pass the limit of open files. Every
  //      PE that sends also receives from every peer, even after a failure of its own, so that nothing
  //      stays queued.
  for (std::size_t first = 0; first < n_chunks; first += kChunksPerExchange) {
    const std::size_t count = std::min(kChunksPerExchange, n_chunks - first);
    fd_list exported;
    try {
      for (std::size_t i = first; i < first + count; ++i) {
        map_and_enable(std::exchange(created[i], 0),
                       reservation_ + boot_.local_pe() * stride_ + mapped_ + i * chunk_size_);
        int fd = -1;
        SHOAL_CU_CHECK(cu.mem_export_to_shareable_handle(&fd, mappings_.back().handle,
                                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        exported.fds.push_back(fd);
      }
    } catch (const std::exception& e) {
      note_failure(e);
    }
    settle("map and export its chunks");

    try {
      for (int peer = 0; peer < boot_.local_size(); ++peer)
        if (peer != boot_.local_pe()) boot_.send_fds(peer, exported.fds);
    } catch (const std::exception& e) {
      note_failure(e);
    }
    for (int peer = 0; peer < boot_.local_size(); ++peer) {
      if (peer == boot_.local_pe()) continue;
      try {
        fd_list received{boot_.recv_fds(peer, count)};
        for (std::size_t i = 0; i < count && failure.empty(); ++i) {
          CUmemGenericAllocationHandle handle{};
          SHOAL_CU_CHECK(cu.mem_import_from_shareable_handle(
              &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(received.fds[i])),
              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
          map_and_enable(handle, reservation_ + std::uint64_t(peer) * stride_ + mapped_ + (first + i) * chunk_size_);
        }
      } catch (const std::exception& e) {
        note_failure(e);
      }
    }
    settle("map its peers' chunks");
  }
  const std::uint64_t before = mapped_;
  mapped_ = target;
  if (on_growth_) on_growth_(mapped_);
  // 4. Step 3 waited for each node-local peer to map its chunks, not for PEs on other nodes. One of those
  //    may put into the new chunks through our proxy as soon as it returns, so across nodes no PE returns
  //    before every PE has mapped its own.
  if (boot_.n_pes() > boot_.local_size()) boot_.barrier();
  SHOAL_LOG_INFO(heap, "heap grown from {} MiB to {} MiB per PE", before >> 20, target >> 20);
}

}  // namespace shoal::detail
