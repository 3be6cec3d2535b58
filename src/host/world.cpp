#include "shoal/world.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "base/config.hpp"
#include "base/log.hpp"
#include "bootstrap/pe_vote.hpp"
#include "host/cuda_check.hpp"
#include "host/driver_api.hpp"
#include "host/proxy_calls.hpp"
#include "host/world_impl.hpp"
#include "transport/network.hpp"

namespace shoal {
namespace detail {
void create_predefined_teams(world& w);  // team.cpp
}
namespace {

// Every collective heap call first gathers this from all PEs; any difference is an error on all.
struct heap_call {
  std::uint64_t sequence;
  std::uint64_t kind;  // a world::impl::collective_kind
  std::uint64_t size_or_offset;
  std::uint64_t alignment;
};

const char* kind_name(std::uint64_t kind) {
  switch (static_cast<world::impl::collective_kind>(kind)) {
    case world::impl::collective_kind::allocate:
      return "allocate";
    case world::impl::collective_kind::free:
      return "free";
    case world::impl::collective_kind::register_buffer:
      return "register_buffer";
    case world::impl::collective_kind::unregister_buffer:
      return "unregister_buffer";
  }
  return "?";
}

}  // namespace

void world::impl::agree(collective_kind kind, std::uint64_t size_or_offset, std::uint64_t alignment, const char* call,
                        const std::exception_ptr& unfinished) {
  world::impl& w = *this;
  heap_call mine{++w.collective_calls, static_cast<std::uint64_t>(kind), size_or_offset, alignment};
  // A PE whose device work failed throws its own error, the others one naming it, before any compares calls:
  // that PE's call cannot go on whatever the others asked for.
  const std::vector<heap_call> all = detail::all_gather_unless_any_pe_failed(
      *w.boot, mine, unfinished, call, "finish its device work before the call");
  for (int pe = 0; pe < w.boot->n_pes(); ++pe) {
    const heap_call& other = all[pe];
    if (std::memcmp(&other, &all[0], sizeof(heap_call)) != 0)
      throw error(errc::invalid_argument, call,
                  fmt::format("PEs disagree at collective heap call #{}: PE 0 called {}({}, alignment {}) but PE {} "
                              "called {}({}, alignment {}); nothing was changed",
                              all[0].sequence, kind_name(all[0].kind), all[0].size_or_offset, all[0].alignment, pe,
                              kind_name(other.kind), other.size_or_offset, other.alignment));
  }
}

namespace {

int pick_device(int requested, const shoal::bootstrap& boot) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0)
    throw error(errc::unsupported, "shoal::init",
                fmt::format("no usable GPU ({}); pass init_options{{.device = shoal::kNoDevice}} for a host-only world",
                            status != cudaSuccess ? cudaGetErrorString(status) : "0 devices"));
  // By place on the host, not in the node: emulated nodes of one host still get a GPU each.
  int device = requested == kAutoDevice ? boot.host_pe() % count : requested;
  if (device < 0 || device >= count)
    throw error(errc::invalid_argument, "shoal::init",
                fmt::format("device {} requested; {} GPUs visible", device, count));
  return device;
}

void setup_device(world::impl& w, int requested) {
  w.device = pick_device(requested, *w.boot);
  SHOAL_CUDA_CHECK(cudaSetDevice(w.device));
  SHOAL_CUDA_CHECK(cudaFree(nullptr));  // create the primary context before driver calls
  w.work_queues = detail::work_queues_of_process(w.device);
  SHOAL_CUDA_CHECK(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
  SHOAL_CUDA_CHECK(cudaHostAlloc(&w.atomic_result, 64, cudaHostAllocMapped));
  SHOAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&w.registration_table), sizeof(detail::registration_table)));
  SHOAL_CUDA_CHECK(cudaMemset(w.registration_table, 0, sizeof(detail::registration_table)));

  w.heap = std::make_unique<detail::symmetric_heap>(
      *w.boot, w.device,
      detail::heap_layout{
          .initial_size = w.cfg.heap_size, .max_size = w.cfg.heap_max_size, .chunk_size = w.cfg.heap_chunk_size});
  w.allocator.emplace(w.heap->mapped());

  // Node layout: which world PEs share this node, and whether they are numbered contiguously.
  auto node = w.boot->node_pes();
  w.node_first_pe = node.empty() ? w.boot->pe() : node.front();
  for (std::size_t i = 0; i < node.size(); ++i) w.node_contiguous &= node[i] == w.node_first_pe + int(i);
  std::vector<std::int32_t> local(w.boot->n_pes(), -1);
  for (std::size_t i = 0; i < node.size(); ++i) local[node[i]] = std::int32_t(i);
  SHOAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&w.local_index), local.size() * sizeof(std::int32_t)));
  SHOAL_CUDA_CHECK(
      cudaMemcpy(w.local_index, local.data(), local.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
}

// What every PE tells the others first in init, before any step that only some PEs take: a PE with a device
// goes on to the heap's collective calls, one with kNoDevice to none, so a job that mixes the two would fail
// later with a bootstrap error (or a timeout) that does not name the cause.
struct init_vote {
  std::int32_t node;
  std::int32_t has_device;  // 0: kNoDevice
};

// PE numbers for a message: the first few, then how many more.
std::string pe_list(const std::vector<int>& pes) {
  constexpr std::size_t kNamed = 8;
  std::string text;
  for (std::size_t i = 0; i < pes.size() && i < kNamed; ++i) text += fmt::format("{}{}", i == 0 ? "" : ", ", pes[i]);
  if (pes.size() > kNamed) text += fmt::format(" and {} more", pes.size() - kNamed);
  return text;
}

// Collective over all PEs: gathers every PE's node, and throws shoal::error(errc::invalid_argument) on every
// PE when some pass kNoDevice and others do not, naming the PEs whose choice differs from PE 0's.
void agree_at_init(world::impl& w, int device) {
  const int n = w.boot->n_pes();
  const init_vote mine{.node = w.boot->node(), .has_device = device != kNoDevice ? 1 : 0};
  std::vector<init_vote> all(static_cast<std::size_t>(n));
  w.boot->all_gather(&mine, all.data(), sizeof(init_vote));
  w.node_of.resize(std::size_t(n));
  std::vector<int> differ;
  for (int pe = 0; pe < n; ++pe) {
    w.node_of[std::size_t(pe)] = all[std::size_t(pe)].node;
    if (all[std::size_t(pe)].has_device != all[0].has_device) differ.push_back(pe);
  }
  if (!differ.empty())
    throw error(
        errc::invalid_argument, "shoal::init",
        fmt::format("PE{} {} passed {} and PE 0 {} (init_options::device): every PE passes kNoDevice, or "
                    "none does; no world was created",
                    differ.size() == 1 ? "" : "s", pe_list(differ), all[0].has_device ? "kNoDevice" : "a device",
                    all[0].has_device ? "a device" : "kNoDevice"));
}

// Collective over all PEs (each with a device): the fewest work queues any PE has. CUDA_DEVICE_MAX_CONNECTIONS
// and MPS are per process, so PEs may differ; a choice made from this PE's own count alone would send some PEs
// into the hierarchical all-reduce and leave others flat, and the job would hang.
void agree_on_work_queues(world::impl& w) {
  const std::int32_t mine = w.work_queues.count;
  std::vector<std::int32_t> all(static_cast<std::size_t>(w.boot->n_pes()));
  w.boot->all_gather(&mine, all.data(), sizeof mine);
  const auto fewest = std::min_element(all.begin(), all.end());
  w.fewest_work_queues = *fewest;
  w.fewest_work_queues_pe = int(fewest - all.begin());
}

// PEs on other nodes are reached through the proxy when the build has a network; without one, init
// still succeeds (node-local work runs) and calls to other nodes fail with a clear error.
void start_proxy(world::impl& w) {
  if (w.boot->n_nodes() <= 1) return;
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  if (detail::driver().module_get_loading_mode(&mode) == CUDA_SUCCESS && mode == CU_MODULE_LAZY_LOADING)
    SHOAL_LOG_WARN(base,
                   "CUDA loads kernels lazily in this process (CUDA_MODULE_LOADING=LAZY, or CUDA started before "
                   "shoal::init): a kernel launched for the first time while another kernel waits for a PE on "
                   "another node can deadlock, since loading it waits for the running kernel and the proxy waits "
                   "for the loading. Set CUDA_MODULE_LOADING=EAGER in the environment of every PE.");
  if (!detail::ucx_network_available()) {
    SHOAL_LOG_WARN(base, "the PEs span {} nodes but shoal was built without UCX: PEs on other nodes are unreachable",
                   w.boot->n_nodes());
    return;
  }
  if (w.work_queues.count < detail::kHierarchicalWorkQueues)
    SHOAL_LOG_WARN(
        base,
        "this process has {} hardware work queue{} for its CUDA streams ({}). The proxy lands other nodes' "
        "puts, signals and atomics with work on a stream of its own, which waits while every queue has "
        "waiting work at its head{}: a kernel that waits for another node then never ends. The "
        "hierarchical all-reduce (which holds two queues) is off. Set CUDA_DEVICE_MAX_CONNECTIONS to at "
        "least {} in every PE's environment; see docs/proxy-design.md, \"Hardware work queues\".",
        w.work_queues.count, w.work_queues.count == 1 ? "" : "s", w.work_queues.source,
        w.work_queues.count == 1 ? " (with one queue: as soon as anything is queued behind such a kernel)" : "",
        detail::kHierarchicalWorkQueues + 1);
  w.proxy =
      std::make_unique<detail::proxy_runtime>(*w.boot, w.heap->base(), w.heap->max_size(), w.heap->mapped(), w.device);
  w.heap->on_growth([proxy = w.proxy.get()](std::uint64_t mapped) { proxy->heap_grew(mapped); });
  detail::preload_proxy_kernels();
}

}  // namespace

namespace {
cudaMemoryType memory_type_of(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // older runtimes report unknown host pointers as an error
    return cudaMemoryTypeUnregistered;
  }
  return attributes.type;
}
}  // namespace

bool detail::is_host_memory(const void* p) {
  const cudaMemoryType type = memory_type_of(p);
  return type == cudaMemoryTypeUnregistered || type == cudaMemoryTypeHost;
}

void detail::check_local_buffer(const void* local, std::size_t bytes, const char* call, local_buffer_use use) {
  if (bytes == 0) return;
  if (local == nullptr)
    throw error(errc::invalid_argument, call, fmt::format("the local buffer is null ({} bytes to move)", bytes));
  const void* last = static_cast<const std::byte*>(local) + bytes - 1;
  const cudaMemoryType first_type = memory_type_of(local), last_type = memory_type_of(last);
  if (first_type == cudaMemoryTypeDevice && last_type == cudaMemoryTypeUnregistered)
    throw error(errc::invalid_argument, call,
                fmt::format("the local buffer [{}, +{} bytes) is shorter than the copy: it starts in device memory, "
                            "but its last byte, at {}, is in no CUDA allocation",
                            local, bytes, last));
  if (use == local_buffer_use::stream_ordered &&
      (first_type == cudaMemoryTypeUnregistered || last_type == cudaMemoryTypeUnregistered))
    throw error(errc::invalid_argument, call,
                "the local buffer is pageable host memory: copying it would block the call and cannot be "
                "captured in a CUDA graph; use device memory or pinned host memory (cudaMallocHost / "
                "cudaHostRegister)");
}

bool detail::copy_needed(const void* to, const void* from, std::size_t bytes, const char* call) {
  if (to == from || bytes == 0) return false;
  const auto x = reinterpret_cast<std::uintptr_t>(to), y = reinterpret_cast<std::uintptr_t>(from);
  if (x < y + bytes && y < x + bytes)
    throw error(errc::invalid_argument, call,
                fmt::format("the destination [{}, +{}) and the source [{}, +{}) overlap", to, bytes, from, bytes));
  return true;
}

void world::impl::require_device(const char* call) const {
  if (device == kNoDevice)
    throw error(errc::unsupported, call, "this world was created with kNoDevice: it has no GPU and no symmetric heap");
}

void world::impl::check_pe(int pe, const char* call) const {
  if (pe < 0 || pe >= boot->n_pes())
    throw error(errc::invalid_argument, call, fmt::format("PE {} is out of range [0, {})", pe, boot->n_pes()));
}

std::uint64_t world::impl::offset_of(const void* p, std::size_t bytes, const char* call) const {
  require_device(call);
  auto* b = static_cast<const std::byte*>(p);
  if (b < heap->base() || std::uint64_t(b - heap->base()) > heap->mapped() ||
      bytes > heap->mapped() - std::uint64_t(b - heap->base()))
    throw error(errc::invalid_argument, call,
                fmt::format("[{}, +{} bytes) is not inside this PE's symmetric heap [{}, +{})", p, bytes,
                            static_cast<const void*>(heap->base()), heap->mapped()));
  return std::uint64_t(b - heap->base());
}

void world::impl::check_symmetric(const void* p, std::size_t bytes, const char* call) const {
  if (registered(p, bytes) == nullptr) offset_of(p, bytes, call);
}

void* world::impl::reachable(const void* p, std::size_t bytes, int pe, const char* call) const {
  check_pe(pe, call);
  require_device(call);
  auto node = boot->node_pes();
  auto it = std::find(node.begin(), node.end(), pe);
  int local = it != node.end() ? int(it - node.begin()) : -1;
  const registration* r = registered(p, bytes);
  std::uint64_t offset = r ? std::uint64_t(static_cast<const std::byte*>(p) - r->base) : offset_of(p, bytes, call);
  if (local < 0)
    throw error(errc::unsupported, call,
                fmt::format("PE {} is on another node: it has no load/store address here{}", pe,
                            proxy ? "" : ", and this job has no proxy transport (shoal was built without UCX)"));
  return r ? r->peers[local] + offset : heap->slot(local) + offset;
}

world::world(std::unique_ptr<impl> impl) noexcept : impl_(std::move(impl)) { impl_->self = this; }
world::world(world&& other) noexcept : impl_(std::move(other.impl_)) {
  if (impl_) impl_->self = this;
}
world& world::operator=(world&& other) noexcept {
  if (this != &other) {
    world old(std::move(*this));  // finalizes the world this object held
    impl_ = std::move(other.impl_);
    if (impl_) impl_->self = this;
  }
  return *this;
}

world::~world() {
  if (!impl_) return;
  // Predefined teams free their heap state first (collective, the same order on every PE).
  impl_->same_local_rank_team.reset();
  impl_->node_team.reset();
  impl_->world_team.reset();
  impl_->alive.reset();  // user teams still alive now outlive the world (team::destroy)
  try {
    if (impl_->device != kNoDevice) SHOAL_CUDA_LOG(cudaDeviceSynchronize());
    // This PE's mappings of the peers' registered buffers close before the barrier, so that once it
    // returns no peer has this PE's buffers open and the user may free them.
    for (impl::registration& r : impl_->registrations) r.close_mappings();
    impl_->boot->barrier();  // no PE unmaps while a peer may still touch its memory
    if (impl_->proxy) impl_->proxy->shutdown();
  } catch (const std::exception& e) {
    SHOAL_LOG_WARN(base, "finalize: {}", e.what());
  }
  if (impl_->heap) impl_->heap->on_growth({});  // it calls the proxy
  impl_->proxy.reset();
  for (impl::registration& r : impl_->registrations) r.release();
  impl_->release_cuda_resources();
}

void world::impl::release_cuda_resources() noexcept {
  if (registration_table) SHOAL_CUDA_LOG(cudaFree(std::exchange(registration_table, nullptr)));
  heap.reset();
  if (local_index) SHOAL_CUDA_LOG(cudaFree(std::exchange(local_index, nullptr)));
  if (atomic_result) SHOAL_CUDA_LOG(cudaFreeHost(std::exchange(atomic_result, nullptr)));
  if (stream) SHOAL_CUDA_LOG(cudaStreamDestroy(std::exchange(stream, nullptr)));
  side.destroy();
  network.destroy();
  pair.destroy();
}

void forked_stream::ensure() {
  if (stream != nullptr) return;
  SHOAL_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  SHOAL_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  SHOAL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
}

void forked_stream::destroy() noexcept {
  if (stream) SHOAL_CUDA_LOG(cudaStreamDestroy(std::exchange(stream, nullptr)));
  if (fork) SHOAL_CUDA_LOG(cudaEventDestroy(std::exchange(fork, nullptr)));
  if (join) SHOAL_CUDA_LOG(cudaEventDestroy(std::exchange(join, nullptr)));
}

void pair_streams::ensure() {
  push.ensure();
  gather.ensure();
  for (auto* events : {&pushed, &reduced})
    for (cudaEvent_t& e : *events)
      if (!e) SHOAL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

void pair_streams::destroy() noexcept {
  push.destroy();
  gather.destroy();
  for (auto* events : {&pushed, &reduced})
    for (cudaEvent_t& e : *events)
      if (e) SHOAL_CUDA_LOG(cudaEventDestroy(std::exchange(e, nullptr)));
}

void world::throw_moved_from(const char* call) {
  throw error(errc::invalid_argument, call,
              "this world was moved from: it has no PE and no heap (use the world it was moved to)");
}

int world::pe() const noexcept { return impl_ ? impl_->boot->pe() : -1; }
int world::n_pes() const noexcept { return impl_ ? impl_->boot->n_pes() : 0; }
int world::device() const noexcept { return impl_ ? impl_->device : kNoDevice; }
int world::work_queues() const noexcept { return impl_ ? impl_->work_queues.count : 0; }
shoal::bootstrap& world::bootstrap() const { return *live("shoal::world::bootstrap").boot; }

void* world::malloc(std::size_t bytes) {
  return live("shoal::world::malloc").align(256, bytes, "shoal::world::malloc");
}

void* world::align(std::size_t alignment, std::size_t bytes) {
  return live("shoal::world::align").align(alignment, bytes, "shoal::world::align");
}

namespace {

// The one collective allocation behind align, malloc, calloc and malloc_array. `refusal` is this PE's own
// error for an argument it cannot take: thrown after the agreement, never before it (see impl::agree). A
// bad argument on one PE then fails the agreement on every PE; the same bad argument on every PE fails
// each PE with its refusal.
void* allocate(world::impl& w, std::size_t alignment, std::size_t bytes, const std::optional<error>& refusal,
               const char* call) {
  w.agree(world::impl::collective_kind::allocate, bytes, alignment, call);
  if (refusal) throw *refusal;
  if (bytes == 0) return nullptr;
  std::optional<std::uint64_t> offset = w.allocator->allocate(bytes, alignment);
  if (!offset) {
    // Deterministic on every PE: the same allocator state asks for the same growth.
    std::uint64_t needed = w.allocator->capacity_needed(bytes, alignment);
    if (needed > w.heap->max_size())
      throw error(errc::out_of_memory, call,
                  fmt::format("{} bytes aligned to {} do not fit: the heap may grow to {} bytes per PE "
                              "(SHOAL_HEAP_MAX_SIZE), of which {} are in use; nothing was allocated",
                              bytes, alignment, w.heap->max_size(), w.allocator->used()));
    w.heap->grow_to(needed);
    w.allocator->grow(w.heap->mapped());
    w.publish_heap_mapped();
    offset = w.allocator->allocate(bytes, alignment);
    if (!offset) throw error(errc::internal, call, "allocation failed after growing the heap");
  }
  return w.heap->base() + *offset;
}

}  // namespace

void world::impl::publish_heap_mapped() {
  if (sync == nullptr) return;  // init publishes once it has allocated the sync words
  const std::uint64_t mapped = heap->mapped();
  // On the world's own non-blocking stream: a kernel running on the user's streams (one waiting for another
  // PE, say) must not hold up this collective call.
  SHOAL_CUDA_CHECK(cudaMemcpyAsync(&sync->heap_mapped_bytes, &mapped, sizeof(mapped), cudaMemcpyHostToDevice, stream));
  SHOAL_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void* world::impl::align(std::size_t alignment, std::size_t bytes, const char* call) {
  require_device(call);
  std::optional<error> refusal;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    refusal.emplace(errc::invalid_argument, call, fmt::format("alignment {} is not a power of two", alignment));
  else if (alignment > heap->alignment())
    refusal.emplace(errc::invalid_argument, call,
                    fmt::format("alignment {} is more than the symmetric heap can give on every PE ({}: its slots lie "
                                "that far apart and no further aligned)",
                                alignment, heap->alignment()));
  return allocate(*this, alignment, bytes, refusal, call);
}

void* world::calloc(std::size_t count, std::size_t size) { return live("shoal::world::calloc").calloc(count, size); }

void* world::align_array(std::size_t alignment, std::size_t count, std::size_t size) {
  return live("shoal::world::malloc_array").align_array(alignment, count, size, "shoal::world::malloc_array");
}

void* world::impl::align_array(std::size_t alignment, std::size_t count, std::size_t size, const char* call) {
  require_device(call);
  if (size == 0 || count <= SIZE_MAX / size) return align(alignment, count * size, call);
  // Agreed as SIZE_MAX bytes, which a matching call on another PE could not allocate either.
  return allocate(*this, alignment, SIZE_MAX,
                  error(errc::invalid_argument, call, fmt::format("{} x {} bytes overflows", count, size)), call);
}

void* world::impl::calloc(std::size_t count, std::size_t size) {
  const char* call = "shoal::world::calloc";
  void* p = align_array(256, count, size, call);
  // Every PE has zeroed its copy before any returns, so no PE writes into a peer's copy before that peer has
  // zeroed it. A vote rather than a barrier: a PE whose zeroing failed would throw alone, leaving the others in
  // the barrier until the bootstrap's timeout. On a failure every PE releases the allocation, so the
  // allocators stay alike.
  try {
    detail::run_on_every_pe(*boot, call, "zero its copy of the allocation", [&] {
      if (p == nullptr) return;
      SHOAL_CUDA_CHECK(cudaMemsetAsync(p, 0, count * size, stream));
      SHOAL_CUDA_CHECK(cudaStreamSynchronize(stream));
    });
  } catch (...) {
    if (p != nullptr) allocator->release(offset_of(p, 0, call));
    throw;
  }
  return p;
}

void world::free(void* p) { live("shoal::world::free").free(p); }

void world::impl::free(void* p) {
  impl& w = *this;
  w.require_device("shoal::world::free");
  // A pointer outside the heap is refused after the agreement, as kForeign, which no heap offset (nor
  // nullptr's ~0) equals: a PE that threw here would leave the others waiting in it.
  constexpr std::uint64_t kForeign = ~0ull - 1;
  std::optional<error> refusal;
  std::uint64_t offset = ~0ull;
  if (p != nullptr) {
    try {
      offset = w.offset_of(p, 0, "shoal::world::free");
    } catch (const error& e) {
      refusal = e;
      offset = kForeign;
    }
  }
  // A kernel may end with requests to other nodes that it posted and never waited for (a collective's
  // last arrival signals, a put_nbi without quiet), aimed at the object being freed on another PE. They
  // complete before this PE agrees, so no PE releases the object (and hands its memory to the next
  // allocation, zeroed) while one of them can still land in it. A failure here goes into the agreement,
  // which fails on every PE, rather than leaving the others waiting in it.
  const std::exception_ptr unfinished = detail::failure_of([&] {
    SHOAL_CUDA_CHECK(cudaDeviceSynchronize());
    if (w.proxy) {
      detail::proxy_quiet_on_stream(w, w.stream);
      detail::proxy_synchronize(w, w.stream);
    }
  });
  w.agree(impl::collective_kind::free, offset, 0, "shoal::world::free", unfinished);
  if (refusal) throw *refusal;
  if (p == nullptr) return;
  if (!w.allocator->release(offset))
    throw error(errc::invalid_argument, "shoal::world::free",
                fmt::format("{} (heap offset {}) is not the start of a live allocation (freed twice?)", p, offset));
}

void* world::ptr(const void* p, int pe) const {
  const impl& w = live("shoal::world::ptr");
  w.check_pe(pe, "shoal::world::ptr");
  try {
    return w.reachable(p, 0, pe, "shoal::world::ptr");
  } catch (const error& e) {
    if (e.category() == errc::unsupported && w.device != kNoDevice) return nullptr;  // another node
    throw;
  }
}

heap_stats world::heap_usage() const {
  const impl& w = live("shoal::world::heap_usage");
  w.require_device("shoal::world::heap_usage");
  return {w.allocator->used(), w.heap->mapped(), w.heap->max_size(), w.heap->chunk_size()};
}

shoal::device_handle world::device_handle() const { return live("shoal::world::device_handle").device_handle(); }

shoal::device_handle world::impl::device_handle() const {
  const impl& w = *this;
  w.require_device("shoal::world::device_handle");
  shoal::device_handle h;
  h.heap_base = w.heap->base();
  h.heap_capacity = w.heap->mapped();
  h.slot_stride = w.heap->slot_stride();
  h.pe = w.boot->pe();
  h.n_pes = w.boot->n_pes();
  h.local_pe = w.boot->local_pe();
  h.local_size = w.boot->local_size();
  h.node_first_pe = w.node_first_pe;
  h.node_contiguous = w.node_contiguous ? 1 : 0;
  h.local_index = w.local_index;
  h.sync = w.sync;
  h.device_barrier_flags = w.device_barrier_flags;
  h.wait_timeout_ns = std::uint64_t(w.cfg.wait_timeout * 1e9);
  h.registered = w.registration_table;
  h.proxy = w.proxy ? w.proxy->device_channel() : nullptr;
  return h;
}

world init(init_options options) {
  auto state = std::make_unique<world::impl>();
  state->cfg = detail::config::load();
  state->boot = options.bootstrap ? std::move(options.bootstrap) : make_bootstrap_from_env();
  detail::set_log_pe(state->boot->pe());
  // Nothing reads a SHOAL_* variable the table lacks: say so, or a misspelt one leaves a default in force unseen.
  for (const std::string& warning : detail::unknown_variable_warnings()) SHOAL_LOG_WARN(base, "{}", warning);
  agree_at_init(*state, options.device);
  // Across nodes the proxy thread makes CUDA calls that running kernels may wait for; a kernel's first
  // launch under lazy loading waits for running kernels, so the two can deadlock. Load eagerly, unless
  // the user chose; this takes effect only if CUDA has not started in this process yet (else start_proxy
  // warns).
  if (state->boot->n_nodes() > 1 && options.device != kNoDevice) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (options.device != kNoDevice) {
    try {
      setup_device(*state, options.device);
      agree_on_work_queues(*state);
    } catch (...) {
      state->release_cuda_resources();  // a failed init (the heap larger than the GPU, say) leaks nothing
      throw;
    }
  }
  world w(std::move(state));
  if (options.device != kNoDevice) {
    // Internal words first, so they sit at the same offset on every PE.
    world::impl& s = w.internals();
    start_proxy(s);
    std::size_t n = std::size_t(w.n_pes());
    auto* words = static_cast<std::byte*>(w.calloc(1, sizeof(detail::sync_state) + 2 * n * sizeof(std::uint64_t)));
    s.sync = reinterpret_cast<detail::sync_state*>(words);
    s.device_barrier_flags = reinterpret_cast<std::uint64_t*>(words + sizeof(detail::sync_state));
    s.stream_barrier_flags = s.device_barrier_flags + n;
    s.publish_heap_mapped();
    detail::create_predefined_teams(w);
  }
  SHOAL_LOG_INFO(base, "initialized: pe {} of {}, node {} of {}, local pe {} of {}, device {}", w.pe(), w.n_pes(),
                 w.bootstrap().node(), w.bootstrap().n_nodes(), w.bootstrap().local_pe(), w.bootstrap().local_size(),
                 w.device());
  return w;
}

}  // namespace shoal
