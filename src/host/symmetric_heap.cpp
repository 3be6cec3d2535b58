#include "host/symmetric_heap.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "base/log.hpp"
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
  SHOAL_CU_CHECK(cu.mem_map(address, chunk_size_, 0, handle, 0));
  mappings_.push_back({address, chunk_size_, handle});
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  SHOAL_CU_CHECK(cu.mem_set_access(address, chunk_size_, &access, 1));
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

  // 1. Commit this PE's new chunks; every PE learns whether all succeeded before anyone maps a peer's.
  CUmemAllocationProp prop = chunk_properties(device_);
  std::vector<CUmemGenericAllocationHandle> created;
  std::string failure;
  for (std::size_t i = 0; i < n_chunks && failure.empty(); ++i) {
    CUmemGenericAllocationHandle handle{};
    CUresult status = cu.mem_create(&handle, chunk_size_, &prop, 0);
    if (status == CUDA_SUCCESS)
      created.push_back(handle);
    else {
      const char* text = "?";
      cu.get_error_string(status, &text);
      failure = text;
    }
  }
  std::vector<std::uint8_t> ok(boot_.n_pes());
  std::uint8_t mine = failure.empty() ? 1 : 0;
  boot_.all_gather(&mine, ok.data(), 1);
  auto failed = std::find(ok.begin(), ok.end(), 0);
  if (failed != ok.end()) {
    for (auto handle : created) cu.mem_release(handle);
    int pe = int(failed - ok.begin());
    throw error(errc::out_of_memory, "symmetric heap",
                fmt::format("PE {} could not commit {} MiB more GPU memory{}", pe, (target - mapped_) >> 20,
                            pe == boot_.pe() ? ": " + failure : ""));
  }

  // 2–3. Batch by batch of chunks: map mine into my slot, export them, pass the descriptors to every
  //      node-local peer, and import each peer's into that peer's slot. A batch bounds the descriptors open
  //      and in flight at once (kChunksPerExchange): a growth by hundreds of chunks (a small
  //      SHOAL_HEAP_CHUNK_SIZE, a large malloc) would otherwise pass the limit of open files.
  for (std::size_t first = 0; first < n_chunks; first += kChunksPerExchange) {
    const std::size_t count = std::min(kChunksPerExchange, n_chunks - first);
    fd_list exported;
    for (std::size_t i = first; i < first + count; ++i) {
      map_and_enable(created[i], reservation_ + boot_.local_pe() * stride_ + mapped_ + i * chunk_size_);
      int fd = -1;
      SHOAL_CU_CHECK(cu.mem_export_to_shareable_handle(&fd, created[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
      exported.fds.push_back(fd);
    }
    for (int peer = 0; peer < boot_.local_size(); ++peer)
      if (peer != boot_.local_pe()) boot_.send_fds(peer, exported.fds);
    for (int peer = 0; peer < boot_.local_size(); ++peer) {
      if (peer == boot_.local_pe()) continue;
      fd_list received{boot_.recv_fds(peer, count)};
      for (std::size_t i = 0; i < count; ++i) {
        CUmemGenericAllocationHandle handle{};
        SHOAL_CU_CHECK(cu.mem_import_from_shareable_handle(
            &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(received.fds[i])),
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        map_and_enable(handle, reservation_ + std::uint64_t(peer) * stride_ + mapped_ + (first + i) * chunk_size_);
      }
    }
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
