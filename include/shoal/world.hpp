// shoal::world: one PE's membership in a job, and the owner of its symmetric heap. shoal::init()
// returns it; its destructor finalizes. There is no hidden global: a program may finalize and init
// again, and passes the world (or the device handle it gives out) to whatever needs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "shoal/bootstrap.hpp"
#include "shoal/device_handle.hpp"

namespace shoal {

inline constexpr int kAutoDevice = -1;  // GPU (PE's place among its host's PEs) % (GPUs visible)
inline constexpr int kNoDevice = -2;    // host-only world: bootstrap and host collectives, no heap

struct init_options {
  // Where PEs find each other. Null: detected from the launcher's environment (make_bootstrap_from_env).
  std::unique_ptr<shoal::bootstrap> bootstrap;
  // The CUDA device this PE uses, kAutoDevice, or kNoDevice. Every PE passes kNoDevice or none does: init
  // checks first, and throws shoal::error(errc::invalid_argument) on every PE naming those that differ.
  int device = kAutoDevice;
};

struct heap_stats {
  std::uint64_t used;        // bytes in live allocations (per PE; the same on every PE)
  std::uint64_t mapped;      // bytes of GPU memory committed per PE
  std::uint64_t max_size;    // the most the heap may grow to per PE (SHOAL_HEAP_MAX_SIZE)
  std::uint64_t chunk_size;  // it grows by whole chunks (SHOAL_HEAP_CHUNK_SIZE, rounded to the GPU's granule)
};

class world {
 public:
  world(world&&) noexcept;
  world& operator=(world&&) noexcept;
  world(const world&) = delete;
  world& operator=(const world&) = delete;
  // Collective: meets the other PEs, then unmaps the heap.
  ~world();

  // A world that was moved from has no PE: pe() is -1, n_pes() 0, device() kNoDevice and work_queues() 0,
  // and every other call (and any function given it) throws shoal::error(errc::invalid_argument) naming it.
  int pe() const noexcept;
  int n_pes() const noexcept;
  int device() const noexcept;  // the CUDA device, or kNoDevice
  // The hardware work queues CUDA gives this process's streams, as init found them: CUDA_DEVICE_MAX_CONNECTIONS,
  // else 8, or 2 for a client of MPS; 0 without a device. Across nodes the proxy needs one to itself while
  // kernels wait for other nodes (docs/proxy-design.md, "Hardware work queues").
  int work_queues() const noexcept;
  shoal::bootstrap& bootstrap() const;

  // ---- symmetric heap. Every call below is collective over all PEs, in the same order with the same
  // arguments everywhere (checked: a mismatch throws shoal::error on every PE and changes nothing).
  // Allocation returns the same offset on every PE; size 0 returns nullptr. The heap grows by mapping
  // more chunks when an allocation does not fit; device handles taken earlier stay valid, and no PE
  // returns from a call that grew the heap before every PE has mapped the new memory, so it may be a
  // target at once.

  void* malloc(std::size_t bytes);                    // 256-byte aligned
  void* calloc(std::size_t count, std::size_t size);  // zeroed on every PE before any PE returns
  // alignment: a power of two, at most the heap's (the GPU's allocation granularity: 2 MiB on H100 and H200)
  void* align(std::size_t alignment, std::size_t bytes);
  // Waits for this PE's device work to finish (as cudaFree does) and for its requests to other nodes to
  // complete (quiet), then frees on every PE: nothing a PE issued before its free lands in the memory
  // after any PE has freed it. A failure in that wait (a kernel that faulted) throws on every PE.
  void free(void* p);

  template <typename T>
  T* malloc_array(std::size_t count) {
    return static_cast<T*>(align_array(alignof(T) > 256 ? alignof(T) : 256, count, sizeof(T)));
  }

  // Collective over all PEs, in the same order with the same size everywhere: makes this PE's device
  // buffer [p, p + bytes) act as a symmetric object: device and host RMA accept addresses inside it and reach
  // the matching buffer of the target PE (node-local PEs, through CUDA IPC). The memory must be one that
  // cudaIpcGetMemHandle exports (cudaMalloc's, or a framework allocator's built on it; not cuMemCreate's, the
  // default cudaMallocAsync pool's or managed memory), and every PE's buffer must start at the same offset
  // modulo 256 bytes from a 256-byte boundary (cudaMalloc's pointers all do). At most 64 buffers at a time.
  // Unregister (also collective) before freeing the memory.
  void register_buffer(void* p, std::size_t bytes);
  void unregister_buffer(void* p);

  // Address of symmetric object `p` on `pe` in this process, for device code or cudaMemcpy; nullptr
  // when that PE is not load/store reachable. Throws for a pe out of range or p outside the heap.
  void* ptr(const void* p, int pe) const;
  heap_stats heap_usage() const;

  // The view kernels take by value.
  shoal::device_handle device_handle() const;

  struct impl;
  impl& internals() const { return live("shoal::world"); }

 private:
  // The runtime, or shoal::error(errc::invalid_argument) naming `call` when this world was moved from.
  impl& live(const char* call) const {
    if (!impl_) throw_moved_from(call);
    return *impl_;
  }
  [[noreturn]] static void throw_moved_from(const char* call);
  // align(alignment, count * size) for malloc_array; when count * size overflows, shoal::error(invalid_argument)
  // on every PE (it still takes part in the collective call, so no PE is left waiting in it).
  void* align_array(std::size_t alignment, std::size_t count, std::size_t size);
  friend world init(init_options options);
  explicit world(std::unique_ptr<impl> impl) noexcept;
  std::unique_ptr<impl> impl_;
};

// Collective over all PEs of the job. Validates the whole SHOAL_* configuration first (a bad value is a
// shoal::error naming the variable), bootstraps, selects the GPU and maps the symmetric heap.
world init(init_options options = {});

}  // namespace shoal
