#include "host/proxy_runtime.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <span>
#include <utility>

#include "base/config.hpp"
#include "base/log.hpp"
#include "host/cuda_check.hpp"
#include "transport/cuda_local_memory.hpp"
#include "transport/network.hpp"
#include "transport/proxy_engine.hpp"

namespace shoal::detail {

namespace {
// 1024 descriptors in flight, 4096 requests between consumption and completion, 1024 fetching atomics
// outstanding at once (a multiple of 32: the owner map is 32-bit words).
constexpr proxy_ring_layout kRingLayout{.capacity = 1024, .window = 4096, .result_slots = 1024};
static_assert(kRingLayout.valid() && kRingLayout.result_slots % 32 == 0);
// Pinned payload buffers, one chunk each: enough for a full window of chunks to and from a few peers at
// once; beyond that payloads fall back to ordinary memory and staging copies.
constexpr payload_buffers kPayloadBuffers{.count = 32, .bytes = kProxyChunkBytes};
}  // namespace

proxy_runtime::proxy_runtime(bootstrap& boot, std::byte* heap_base, std::uint64_t heap_bytes, std::uint64_t heap_mapped,
                             int device)
    : boot_(boot) {
  try {
    set_up(heap_base, heap_bytes, heap_mapped, device);
  } catch (...) {
    release();  // the destructor does not run for a constructor that throws: a failed init leaks nothing
    throw;
  }
}

void proxy_runtime::set_up(std::byte* heap_base, std::uint64_t heap_bytes, std::uint64_t heap_mapped, int device) {
  net_ = make_ucx_network(boot_);
  memory_ = make_cuda_local_memory(heap_base, heap_bytes, device, kPayloadBuffers);
  open_payload_windows();

  SHOAL_CUDA_CHECK(cudaHostAlloc(&shared_, kRingLayout.shared_bytes(), cudaHostAllocMapped | cudaHostAllocPortable));
  SHOAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&head_), sizeof(std::uint64_t)));
  SHOAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&owners_), kRingLayout.result_slots / 8));
  SHOAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&channel_), sizeof(proxy_channel)));
  // The host cannot write the device-memory head, so the ring starts from a view without it.
  proxy_ring_view host_view = kRingLayout.carve(shared_, nullptr);
  proxy_ring_initialize(host_view, 0);
  SHOAL_CUDA_CHECK(cudaMemset(head_, 0, sizeof(std::uint64_t)));
  SHOAL_CUDA_CHECK(cudaMemset(owners_, 0, kRingLayout.result_slots / 8));
  const proxy_ring_view ring = kRingLayout.carve(shared_, head_);
  const proxy_channel channel{.ring = ring, .result_owners = owners_};
  SHOAL_CUDA_CHECK(cudaMemcpy(channel_, &channel, sizeof(channel), cudaMemcpyHostToDevice));

  const proxy_limits limits{.n_pes = boot_.n_pes(), .heap_bytes = heap_bytes, .completion_slots = ring.result_slots};
  // The watchdog speaks before a kernel's wait for the proxy times out: at half SHOAL_WAIT_TIMEOUT, 5 s at most.
  const double timeout_ms = process_config().wait_timeout * 1000;  // 0: kernels wait forever
  const auto stall_warning = std::chrono::milliseconds(
      timeout_ms > 0 ? std::clamp<std::int64_t>(std::int64_t(timeout_ms / 2), 1, 5000) : 5000);
  const proxy_engine_options options{
      .lend_min_bytes = std::max<std::uint64_t>(process_config().proxy_lend_min_bytes, 1),
      .stall_warning = stall_warning};
  engine_ = std::make_unique<proxy_engine>(ring, *net_, *memory_, limits, options);
  engine_->heap_mapped(heap_mapped);
  boot_.barrier();  // every engine's handlers are installed before any PE's engine sends
  engine_->start();
  SHOAL_LOG_INFO(base, "proxy started: {}", describe());
}

// The payload buffers move into the network's window where it has one, and the peers' windows this PE
// maps are pinned for the copy engines: a payload to or from such a peer then crosses without any CPU
// copy, as over a NIC that DMAs from registered memory.
void proxy_runtime::open_payload_windows() {
  const payload_view_check adopt{.fn =
                                     [](void* ctx, std::span<const std::byte> view) {
                                       auto* self = static_cast<proxy_runtime*>(ctx);
                                       const bool adopted = self->memory_->adopt_peer_window(view);
                                       self->peer_windows_ += adopted;
                                       return adopted;
                                     },
                                 .ctx = this};
  const std::span<std::byte> window = net_->open_payload_window(kPayloadBuffers.count * kPayloadBuffers.bytes, adopt);
  lends_from_window_ = !window.empty() && memory_->lend_from(window);
}

// The local memory goes before the network: it unpins the windows, which the network unmaps.
void proxy_runtime::shutdown() {
  if (!engine_) return;
  boot_.barrier();  // every PE is past its last request
  // A failure the engine recorded is raised after the second barrier: the other PEs wait there, and a PE
  // that left early would hold them until the bootstrap's timeout, which then names a live PE.
  std::exception_ptr failure;
  try {
    engine_->stop();
  } catch (...) {
    failure = std::current_exception();
  }
  engine_.reset();
  memory_.reset();
  try {
    boot_.barrier();  // no engine sends any more: the networks may close
  } catch (const std::exception& e) {
    // The engine's failure is the cause; the barrier's error (a peer gone) follows from it.
    if (!failure) throw;
    SHOAL_LOG_WARN(base, "proxy shutdown: {}", e.what());
  }
  net_.reset();
  if (failure) std::rethrow_exception(failure);
}

proxy_runtime::~proxy_runtime() { release(); }

// In the order shutdown() keeps: the engine (its thread uses the ring, the memory and the network), the
// local memory (it unpins the windows the network maps), the network; then the ring's CUDA memory.
void proxy_runtime::release() noexcept {
  try {
    engine_.reset();  // stops the thread without a collective: the job is failing or ending
    memory_.reset();
    net_.reset();
  } catch (const std::exception& e) {
    SHOAL_LOG_WARN(base, "proxy shutdown: {}", e.what());
  }
  memory_.reset();
  if (channel_) SHOAL_CUDA_LOG(cudaFree(std::exchange(channel_, nullptr)));
  if (owners_) SHOAL_CUDA_LOG(cudaFree(std::exchange(owners_, nullptr)));
  if (head_) SHOAL_CUDA_LOG(cudaFree(std::exchange(head_, nullptr)));
  if (shared_) SHOAL_CUDA_LOG(cudaFreeHost(std::exchange(shared_, nullptr)));
}

void proxy_runtime::heap_grew(std::uint64_t bytes) noexcept {
  if (engine_) engine_->heap_mapped(bytes);
}

void proxy_runtime::check() const {
  if (engine_) engine_->check();
}

bool proxy_runtime::failed() const noexcept { return engine_ && engine_->failed(); }

std::string proxy_runtime::describe() const {
  const network_capabilities& c = net_->capabilities();
  return fmt::format("{} over {} ({}; payload window {}, {} of {} peers' read in place), ring of {} descriptors",
                     c.library, c.transports,
                     c.cuda_memory ? "GPU memory directly" : "GPU memory staged through host memory",
                     lends_from_window_ ? "open" : "none", peer_windows_, boot_.n_pes() - 1, kRingLayout.capacity);
}

}  // namespace shoal::detail
