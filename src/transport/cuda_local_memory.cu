// The GPU heap's local_memory (cuda_local_memory.hpp).
#include <cuda/atomic>

#include <cstring>
#include <deque>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "host/cuda_check.hpp"
#include "host/driver_api.hpp"
#include "transport/cuda_local_memory.hpp"

namespace shoal::detail {
namespace {

template <typename T>
__device__ T apply_atomic(T* word, proxy_atomic_op op, T value, T compare) {
  cuda::atomic_ref<T, cuda::thread_scope_system> ref(*word);
  switch (op) {
    case proxy_atomic_op::fetch:
      return ref.load(cuda::memory_order_relaxed);
    case proxy_atomic_op::set:
    case proxy_atomic_op::swap:
      return ref.exchange(value, cuda::memory_order_relaxed);
    case proxy_atomic_op::compare_swap:
      ref.compare_exchange_strong(compare, value, cuda::memory_order_relaxed);
      return compare;  // the old value, whether or not it matched
    case proxy_atomic_op::fetch_add:
    case proxy_atomic_op::add:
      return ref.fetch_add(value, cuda::memory_order_relaxed);
    case proxy_atomic_op::fetch_and:
    case proxy_atomic_op::bit_and:
      return ref.fetch_and(value, cuda::memory_order_relaxed);
    case proxy_atomic_op::fetch_or:
    case proxy_atomic_op::bit_or:
      return ref.fetch_or(value, cuda::memory_order_relaxed);
    case proxy_atomic_op::fetch_xor:
    case proxy_atomic_op::bit_xor:
      return ref.fetch_xor(value, cuda::memory_order_relaxed);
  }
  return T{};
}

template <typename F, typename W>
__device__ W float_add(void* word, std::uint64_t operand_bits) {
  F operand;
  const W bits = W(operand_bits);
  memcpy(&operand, &bits, sizeof(F));
  const F old = cuda::atomic_ref<F, cuda::thread_scope_system>(*static_cast<F*>(word))
                    .fetch_add(operand, cuda::memory_order_relaxed);
  W out;
  memcpy(&out, &old, sizeof(F));
  return out;
}

// Float fetch/set/swap are bit moves, done as integers; float adds are the only float arithmetic.
__global__ void atomic_kernel(void* word, local_atomic op, std::uint64_t* old) {
  const bool adds = op.op == proxy_atomic_op::fetch_add || op.op == proxy_atomic_op::add;
  if (adds && op.type == proxy_atomic_type::float32)
    *old = float_add<float, std::uint32_t>(word, op.value);
  else if (adds && op.type == proxy_atomic_type::float64)
    *old = float_add<double, std::uint64_t>(word, op.value);
  else if (proxy_atomic_width(op.type) == 4)
    *old = apply_atomic(static_cast<std::uint32_t*>(word), op.op, std::uint32_t(op.value), std::uint32_t(op.compare));
  else
    *old = apply_atomic(static_cast<std::uint64_t*>(word), op.op, op.value, op.compare);
}

// Stream order puts this after every earlier copy; release makes their data visible before the signal.
__global__ void signal_add_kernel(std::uint64_t* word, std::uint64_t value) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*word).fetch_add(value, cuda::memory_order_release);
}

class cuda_local_memory final : public local_memory {
 public:
  cuda_local_memory(std::byte* heap_base, std::uint64_t heap_bytes, int device, const payload_buffers& lendable)
      : base_(heap_base), bytes_(heap_bytes), device_(device) {
    try {
      set_up(lendable);
    } catch (...) {
      release();  // the destructor does not run for a constructor that throws: a failed init leaks nothing
      throw;
    }
  }
  ~cuda_local_memory() override { release(); }

  std::uint64_t heap_bytes() const noexcept override { return bytes_; }

  // Copies go through pinned staging, so they are truly asynchronous (a copy to or from pageable memory
  // would make the thread wait for it) and the caller's buffers are free as the contract says: a read's
  // data moves from staging into `to` at flush(), a write's source is staged before the call returns.
  // Lent payload buffers are pinned already: the copy engine fills and drains them directly.
  void read(local_ref from, void* to, std::size_t bytes) override {
    bind();
    if (from.is_host) return (void)std::memcpy(to, resolve(from), bytes);
    if (lendable_.owns(to)) {
      SHOAL_CUDA_CHECK(cudaMemcpyAsync(to, resolve(from), bytes, cudaMemcpyDefault, stream_));
      return;
    }
    std::byte* stage = reserve(bytes);
    if (stage == nullptr) {  // larger than all of staging: one blocking copy
      SHOAL_CUDA_CHECK(cudaMemcpyAsync(to, resolve(from), bytes, cudaMemcpyDefault, stream_));
      SHOAL_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return;
    }
    SHOAL_CUDA_CHECK(cudaMemcpyAsync(stage, resolve(from), bytes, cudaMemcpyDefault, stream_));
    reads_.push_back({to, stage, bytes});
  }

  void write(local_ref to, const void* from, std::size_t bytes) override {
    bind();
    if (to.is_host) return (void)std::memcpy(resolve(to), from, bytes);
    // An aligned 8-byte word (a flag, a small put) is one stream memory write: no staging, no copy.
    if (bytes == 8 && reinterpret_cast<std::uintptr_t>(resolve(to)) % 8 == 0) {
      std::uint64_t word;
      std::memcpy(&word, from, sizeof word);
      SHOAL_CU_CHECK(driver().stream_write_value64(stream_, reinterpret_cast<CUdeviceptr>(resolve(to)), word, 0));
      return;
    }
    if (lendable_.owns(from) || in_peer_window(from)) {
      SHOAL_CUDA_CHECK(cudaMemcpyAsync(resolve(to), from, bytes, cudaMemcpyDefault, stream_));
      return;
    }
    std::byte* stage = reserve(bytes);
    if (stage == nullptr) {
      SHOAL_CUDA_CHECK(cudaMemcpyAsync(resolve(to), from, bytes, cudaMemcpyDefault, stream_));
      SHOAL_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return;
    }
    std::memcpy(stage, from, bytes);
    SHOAL_CUDA_CHECK(cudaMemcpyAsync(resolve(to), stage, bytes, cudaMemcpyDefault, stream_));
  }

  void atomic(std::uint64_t offset, const local_atomic& op, std::uint64_t* old) override {
    bind();
    if (pending_.size() == kOldSlots) flush();
    const std::size_t slot = pending_.size();
    atomic_kernel<<<1, 1, 0, stream_>>>(base_ + offset, op, old_values_ + slot);
    SHOAL_CUDA_CHECK(cudaGetLastError());
    pending_.push_back(old);
  }

  void signal(std::uint64_t offset, proxy_signal_op op, std::uint64_t value) override {
    bind();
    auto* word = reinterpret_cast<std::uint64_t*>(base_ + offset);
    if (op == proxy_signal_op::set) {
      // A stream memory write waits for earlier work of the stream and needs no SM, so it lands even
      // while the PE's kernels occupy every SM.
      SHOAL_CU_CHECK(driver().stream_write_value64(stream_, reinterpret_cast<CUdeviceptr>(word), value, 0));
    } else {
      signal_add_kernel<<<1, 1, 0, stream_>>>(word, value);
      SHOAL_CUDA_CHECK(cudaGetLastError());
    }
  }

  std::byte* lend(std::size_t bytes) override { return lendable_.take(bytes); }
  void give_back(std::byte* buffer) override { lendable_.give_back(buffer); }

  // The window is pinned here (cudaHostRegister), so the copy engines fill and drain it as they do the
  // buffers of cudaMallocHost; it replaces them.
  bool lend_from(std::span<std::byte> memory) override {
    if (lendable_.slot_bytes() == 0 || !pin(memory)) return false;
    if (!lendable_.move_to(memory)) return false;  // stays pinned until this object goes: harmless
    if (lend_storage_) SHOAL_CUDA_CHECK(cudaFreeHost(std::exchange(lend_storage_, nullptr)));
    return true;
  }

  // A peer's window, pinned here too: the copy engine reads a borrowed payload straight from it.
  bool adopt_peer_window(std::span<const std::byte> view) override {
    if (!pin(view)) return false;
    peer_windows_.push_back(view);
    return true;
  }

  void flush() override {
    bind();
    SHOAL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    retire(pending_.size(), reads_.size());
    for (const batch& b : batches_) events_.push_back(b.done);
    batches_.clear();
    completed_ = issued_;
    staged_since_flush_ = false;
    recycle();
  }

  // One event per flush: a batch's copies run while the proxy thread serves the next batches.
  std::uint64_t flush_begin() override {
    bind();
    cudaEvent_t done = nullptr;
    if (events_.empty()) {
      SHOAL_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    } else {
      done = events_.back();
      events_.pop_back();
    }
    SHOAL_CUDA_CHECK(cudaEventRecord(done, stream_));
    batches_.push_back({done, pending_.size(), reads_.size()});
    staged_since_flush_ = false;  // this flush's event follows every copy from staging so far
    return ++issued_;
  }

  bool flushed(std::uint64_t ticket) override {
    bind();
    while (completed_ < ticket && !batches_.empty()) {
      const cudaError_t status = cudaEventQuery(batches_.front().done);
      if (status == cudaErrorNotReady) return false;
      SHOAL_CUDA_CHECK(status);
      const batch b = batches_.front();
      batches_.pop_front();
      retire(b.atomics_end, b.reads_end);
      events_.push_back(b.done);
      ++completed_;
    }
    if (batches_.empty()) recycle();
    return completed_ >= ticket;
  }

 private:
  static constexpr std::size_t kOldSlots = 4096;
  static constexpr std::size_t kStagingBytes = std::size_t{32} << 20;

  // The constructor's work; what it made before a throw is released by release().
  void set_up(const payload_buffers& lendable) {
    bind();
    int least = 0, greatest = 0;
    SHOAL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    // High priority: the CTAs of an atomic or signal kernel go ahead of queued work of user kernels.
    SHOAL_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
    SHOAL_CUDA_CHECK(cudaMallocHost(&old_values_, kOldSlots * sizeof(std::uint64_t)));
    SHOAL_CUDA_CHECK(cudaMallocHost(&staging_, kStagingBytes));
    if (lendable.count != 0 && lendable.bytes != 0) {
      SHOAL_CUDA_CHECK(cudaMallocHost(&lend_storage_, lendable.count * lendable.bytes));
      lendable_ = payload_pool(lend_storage_, lendable.bytes, lendable.count);
    }
    // Load the kernels now: with lazy module loading, a first launch while a kernel of the PE spins
    // waiting for this proxy would wait for that kernel to end, and it never would.
    cudaFuncAttributes attributes{};
    SHOAL_CUDA_CHECK(cudaFuncGetAttributes(&attributes, atomic_kernel));
    SHOAL_CUDA_CHECK(cudaFuncGetAttributes(&attributes, signal_add_kernel));
  }

  // Frees whatever this object holds, each only once: the destructor, and a constructor that throws (whose
  // destructor never runs). The stream is drained first: copies on it may still read staging or write the
  // old-value slots.
  void release() noexcept {
    if (stream_) SHOAL_CUDA_LOG(cudaStreamSynchronize(stream_));
    for (const batch& b : batches_) SHOAL_CUDA_LOG(cudaEventDestroy(b.done));
    batches_.clear();
    for (cudaEvent_t e : events_) SHOAL_CUDA_LOG(cudaEventDestroy(e));
    events_.clear();
    if (stream_) SHOAL_CUDA_LOG(cudaStreamDestroy(std::exchange(stream_, nullptr)));
    if (old_values_) SHOAL_CUDA_LOG(cudaFreeHost(std::exchange(old_values_, nullptr)));
    if (staging_) SHOAL_CUDA_LOG(cudaFreeHost(std::exchange(staging_, nullptr)));
    if (lend_storage_) SHOAL_CUDA_LOG(cudaFreeHost(std::exchange(lend_storage_, nullptr)));
    for (const void* p : pinned_) SHOAL_CUDA_LOG(cudaHostUnregister(const_cast<void*>(p)));
    pinned_.clear();
  }

  struct staged_read {
    void* to;
    const std::byte* stage;
    std::size_t bytes;
  };
  // A flush begun: its event, and how many atomics and staged reads were issued before it.
  struct batch {
    cudaEvent_t done;
    std::size_t atomics_end;
    std::size_t reads_end;
  };

  // The copies before (atomics_end, reads_end) have landed: store old values and staged reads.
  void retire(std::size_t atomics_end, std::size_t reads_end) {
    for (; atomics_done_ < atomics_end; ++atomics_done_) *pending_[atomics_done_] = old_values_[atomics_done_];
    for (; reads_done_ < reads_end; ++reads_done_) {
      const staged_read& r = reads_[reads_done_];
      std::memcpy(r.to, r.stage, r.bytes);
    }
  }

  // No flush outstanding: the old-value slots and staging are free again, once nothing issued since
  // the last flush still needs them. A write staged since then may still be queued behind the stream's
  // other work, reading its staging: that staging is not free until a flush's event has passed it.
  void recycle() {
    if (atomics_done_ != pending_.size() || reads_done_ != reads_.size() || staged_since_flush_) return;
    pending_.clear();
    reads_.clear();
    atomics_done_ = reads_done_ = 0;
    staged_ = 0;
  }

  // `bytes` of staging, 64-byte aligned; flushes first when the rest is too small, null when it never fits.
  std::byte* reserve(std::size_t bytes) {
    if (bytes > kStagingBytes) return nullptr;
    if (staged_ + bytes > kStagingBytes) flush();
    std::byte* at = staging_ + staged_;
    staged_ += (bytes + 63) / 64 * 64;
    staged_since_flush_ = true;
    return at;
  }

  // The CUDA runtime's current device is per thread: the proxy thread is not the one that made this.
  void bind() {
    if (bound_ == std::this_thread::get_id()) return;
    SHOAL_CUDA_CHECK(cudaSetDevice(device_));
    bound_ = std::this_thread::get_id();
  }

  void* resolve(local_ref ref) const {
    if (ref.is_address) return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ref.value));
    return base_ + ref.value;  // the engine checked the range against heap_bytes()
  }

  std::byte* base_;
  std::uint64_t bytes_;
  int device_;
  std::thread::id bound_{};
  cudaStream_t stream_ = nullptr;
  std::uint64_t* old_values_ = nullptr;  // pinned: atomic kernels write old values here
  std::vector<std::uint64_t*> pending_;  // where each old value goes at flush()
  std::byte* staging_ = nullptr;         // pinned
  std::size_t staged_ = 0;               // bytes of staging in use until flush()
  bool staged_since_flush_ = false;      // staging handed out since the last flush began
  std::vector<staged_read> reads_;
  std::size_t atomics_done_ = 0, reads_done_ = 0;  // prefixes of pending_ and reads_ already stored
  std::deque<batch> batches_;                      // flushes begun and not yet seen complete, oldest first
  std::vector<cudaEvent_t> events_;                // free events
  std::uint64_t issued_ = 0, completed_ = 0;       // flush tickets
  // Pins host memory that this object does not own (payload windows) until it is destroyed; false (and
  // logged) when CUDA refuses.
  bool pin(std::span<const std::byte> memory) {
    bind();
    void* p = const_cast<std::byte*>(memory.data());
    if (const cudaError_t e = cudaHostRegister(p, memory.size(), cudaHostRegisterPortable); e != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky: clear it
      log_cuda_error(e, "cudaHostRegister (a payload window; payloads are staged instead)", __FILE__, __LINE__);
      return false;
    }
    pinned_.push_back(p);
    return true;
  }
  bool in_peer_window(const void* p) const noexcept {
    const auto* b = static_cast<const std::byte*>(p);
    for (const std::span<const std::byte> w : peer_windows_)
      if (b >= w.data() && b < w.data() + w.size()) return true;
    return false;
  }

  std::byte* lend_storage_ = nullptr;  // pinned: the payload buffers, unless they come from a window
  std::vector<const void*> pinned_;    // windows pinned by pin()
  std::vector<std::span<const std::byte>> peer_windows_;
  payload_pool lendable_;
};

}  // namespace

std::unique_ptr<local_memory> make_cuda_local_memory(std::byte* heap_base, std::uint64_t heap_bytes, int device,
                                                     const payload_buffers& lendable) {
  return std::make_unique<cuda_local_memory>(heap_base, heap_bytes, device, lendable);
}

}  // namespace shoal::detail
