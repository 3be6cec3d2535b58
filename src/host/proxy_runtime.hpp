// The proxy transport of one PE, put together: the network (UCX), the GPU heap's local_memory, the ring
// (descriptor slots and completion words in pinned host memory, the ticket counter in device memory),
// the owner map of the ring's result slots, and the engine thread that drains the ring. The world makes
// one when its PEs span nodes (or emulated nodes); kernels reach it through device_handle::proxy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "shoal/bootstrap.hpp"
#include "shoal/detail/proxy_channel.hpp"

namespace shoal::detail {

class network;
class local_memory;
class proxy_engine;

class proxy_runtime {
 public:
  // Collective over the job's PEs. `heap_base` is this PE's heap slot, `heap_bytes` the most it can map,
  // `heap_mapped` what it has mapped now. Throws shoal::error(errc::unsupported) in a build without UCX.
  proxy_runtime(bootstrap& boot, std::byte* heap_base, std::uint64_t heap_bytes, std::uint64_t heap_mapped, int device);
  ~proxy_runtime();  // shutdown() without throwing, if it was not called
  proxy_runtime(const proxy_runtime&) = delete;
  proxy_runtime& operator=(const proxy_runtime&) = delete;

  // Collective: stops the engine once every PE is done with the proxy, then closes the network. Call it
  // after the job's last barrier, while the bootstrap still works.
  void shutdown();

  // The heap now has `bytes` mapped: call it before any PE can address them (symmetric_heap::on_growth).
  void heap_grew(std::uint64_t bytes) noexcept;

  const proxy_channel* device_channel() const noexcept { return channel_; }
  // Throws the engine's failure (a peer that died is named), if any.
  void check() const;
  bool failed() const noexcept;
  std::string describe() const;

 private:
  bootstrap& boot_;
  std::unique_ptr<network> net_;
  std::unique_ptr<local_memory> memory_;
  void* shared_ = nullptr;            // pinned host memory: the ring's slots and completion words
  std::uint64_t* head_ = nullptr;     // device memory: the ticket counter
  std::uint32_t* owners_ = nullptr;   // device memory: result slot owners
  proxy_channel* channel_ = nullptr;  // device memory: what device_handle::proxy points at
  std::unique_ptr<proxy_engine> engine_;
  bool lends_from_window_ = false;  // payload buffers are in the network's window (open_payload_windows)
  int peer_windows_ = 0;            // peers' windows pinned here for the copy engines
  // The constructor's work; what it made before a throw is released by release().
  void set_up(std::byte* heap_base, std::uint64_t heap_bytes, std::uint64_t heap_mapped, int device);
  void open_payload_windows();
  // Frees whatever of the above exists, without a collective and without throwing: the destructor, and a
  // constructor that throws (whose destructor never runs).
  void release() noexcept;
};

}  // namespace shoal::detail
