// What a world owns. Private to the runtime.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/config.hpp"
#include "coll/pair_chunks.hpp"
#include "host/heap_allocator.hpp"
#include "host/proxy_runtime.hpp"
#include "host/symmetric_heap.hpp"
#include "host/work_queues.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/team.hpp"
#include "shoal/world.hpp"

namespace shoal {

namespace detail {
// True for any host memory, pinned or pageable (what the proxy must copy with the CPU: proxy_calls.cu).
bool is_host_memory(const void* p);
// What a put or get asks of its local buffer: any memory CUDA can copy (the blocking forms), or memory a
// copy on a stream can use without the host (the stream forms: device or pinned host memory).
enum class local_buffer_use { any_memory, stream_ordered };
// The local buffer of a put or get that moves `bytes` > 0; throws naming `call` when
// - it is null;
// - it starts in device memory and its last byte lies in no CUDA allocation: shorter than the copy. Caught
//   here, before a copy to another node hands it to the proxy thread. A last byte inside another allocation
//   passes; within a node CUDA refuses that copy (local_copy.hpp);
// - for stream_ordered use, either end is pageable host memory (a pinned registration may cover only the
//   buffer's start). A copy from it would make the call wait for the data to be staged and cannot be
//   captured in a graph, so the stream forms refuse it rather than behave unlike the rest of the stream API.
// Asks CUDA about the buffer's two ends, nothing more.
void check_local_buffer(const void* local, std::size_t bytes, const char* call,
                        local_buffer_use use = local_buffer_use::any_memory);
// Whether a copy from `from` to `to` has anything to do: false for one range onto itself (a put or get of an
// object to this PE itself). A partial overlap throws naming `call`: cudaMemcpy's result there is undefined.
bool copy_needed(const void* to, const void* from, std::size_t bytes, const char* call);
}  // namespace detail

// A stream that work forks to from a caller's stream (record `fork` there, wait on it here) and joins back
// from (record `join` here, wait on it there). Created on first use (ensure()); whoever owns one keeps a
// mutex beside it that serializes its users.
struct forked_stream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  void ensure();
  void destroy() noexcept;
};

// The streams of the two-member reductions with the copy engines (coll/copy_engine_reduce.hpp): `push`
// sends this member's chunks of the peer's result, `gather` (all-reduce only) sends the reduced chunks
// of its own back; pushed[k] and reduced[k] hand chunk k over. Created on first use.
struct pair_streams {
  forked_stream push, gather;
  std::array<cudaEvent_t, detail::kMaxPairChunks> pushed{}, reduced{};
  void ensure();
  void destroy() noexcept;
};

struct world::impl {
  world* self = nullptr;  // the world object that owns this impl (kept current when the world moves)
  detail::config cfg;
  std::unique_ptr<shoal::bootstrap> boot;
  int device = kNoDevice;
  detail::work_queue_count work_queues;  // read at init (host/work_queues.hpp); count 0 without a device
  // The fewest work queues of any PE, and the first PE with that few: agreed at init, so that choices that
  // depend on them (the hierarchical all-reduce: coll/hierarchical.hpp) come out alike on every PE.
  int fewest_work_queues = 0;
  int fewest_work_queues_pe = -1;

  // Present when device != kNoDevice.
  std::unique_ptr<detail::symmetric_heap> heap;
  std::optional<detail::heap_allocator> allocator;
  std::uint64_t collective_calls = 0;  // numbers heap calls, so mismatches name which call disagreed
  std::uint64_t teams_created = 0;     // numbers this PE's teams (team_handle::id)

  // Node layout for the device handle.
  std::vector<int> node_of;  // [n_pes]: the node of every PE (emulated nodes count as nodes)
  bool node_contiguous = true;
  int node_first_pe = 0;
  std::int32_t* local_index = nullptr;  // device memory [n_pes]

  // Internal symmetric words (one calloc at init, offset identical on every PE).
  detail::sync_state* sync = nullptr;
  std::uint64_t* device_barrier_flags = nullptr;  // [n_pes] barrier_all in kernels (and on a stream across nodes)
  std::uint64_t* stream_barrier_flags = nullptr;  // [n_pes] barrier_all_on_stream's arrival flags
  // Writes heap->mapped() to sync->heap_mapped_bytes, where the device's debug checks read it; at init once
  // `sync` exists, and after every growth.
  void publish_heap_mapped();

  // Registered user buffers (world::register_buffer), mirrored into a device table for kernels.
  struct registration {
    std::byte* base;
    std::uint64_t bytes;
    std::vector<std::byte*> peers;    // by local PE; mine is `base`
    std::vector<void*> ipc_mappings;  // to close with cudaIpcCloseMemHandle
    std::byte** device_peers;         // device copy of `peers`
    void close_mappings() noexcept;   // this PE's mappings of the peers' buffers; each only once
    void release() noexcept;          // close_mappings, and the device copy of `peers`
  };
  std::vector<registration> registrations;
  detail::registration_table* registration_table = nullptr;  // device memory
  void upload_registrations();
  // The registration holding [p, p + bytes), or null.
  const registration* registered(const void* p, std::size_t bytes) const;

  // Frees the CUDA objects this world made (finalize, or an init that failed partway); each only once.
  void release_cuda_resources() noexcept;

  // Predefined teams (shoal/team.hpp), created by init after the sync words, destroyed first.
  std::unique_ptr<team> world_team, node_team, same_local_rank_team;
  // Teams hold it weakly: reset by finalize once the predefined teams are gone, so that a user team that
  // outlives the world lets go of it instead of freeing its state in a heap that no longer exists.
  std::shared_ptr<const void> alive = std::make_shared<const int>(0);

  cudaStream_t stream = nullptr;  // for blocking host-initiated operations

  // The proxy transport, when the PEs span nodes and the build has a network (UCX); else null, and PEs
  // on other nodes cannot be reached.
  std::unique_ptr<detail::proxy_runtime> proxy;
  // A host atomic_set to another node was posted through the proxy since the last quiet: barrier_all must
  // complete it (shoal/host_rma.hpp).
  bool host_atomics_posted = false;
  // False for PEs out of range too: the callers' checks that follow report those.
  bool on_other_node(int pe) const {
    return pe >= 0 && std::size_t(pe) < node_of.size() && node_of[std::size_t(pe)] != node_of[std::size_t(boot->pe())];
  }

  // A second stream for on-stream collectives that copy with the copy engines: the own block's copy
  // runs on it beside the copies to peers, forked from and joined back into the caller's stream.
  std::mutex side_mutex;
  forked_stream side;
  // The network stream of a pipelined hierarchical all-reduce (coll/hierarchical.hpp): the phase across
  // nodes of each chunk runs on it while the caller's stream runs the node phases of the chunks either
  // side; its events hand each chunk over.
  std::mutex network_mutex;
  forked_stream network;
  std::mutex pair_mutex;
  pair_streams pair;
  // Where a host atomic's kernel leaves the old value: pinned host memory mapped for the device, read
  // after the stream is synchronized. Not device memory copied back: a copy into the caller's pageable
  // variable would wait for the kernel inside the CUDA driver, and across nodes that kernel waits for
  // the proxy thread, whose CUDA calls that wait can hold up (seen at 4 PEs on 2 emulated nodes).
  void* atomic_result = nullptr;
  std::mutex atomic_mutex;  // the result slot is one: a host atomic holds it from launch to read

  // Collective calls that change the heap or the registered buffers check first, across all PEs, that
  // every PE makes the same call with the same sizes; a mismatch throws on every PE, nothing changed.
  // Nothing a PE can refuse on its own (a bad argument) may throw before this: the other PEs would wait
  // in it until the bootstrap's timeout, or pair their call with that PE's next collective heap call.
  // `unfinished` is the failure of this PE's own step before the agreement (waiting for its device), or
  // null: a failure on any PE fails the agreement on every PE, as detail::throw_if_any_pe_failed says.
  enum class collective_kind : std::uint64_t { allocate = 1, free, register_buffer, unregister_buffer };
  void agree(collective_kind kind, std::uint64_t size_or_offset, std::uint64_t alignment, const char* call,
             const std::exception_ptr& unfinished = nullptr);

  // Throws shoal::error(errc::unsupported) when the world was made with kNoDevice.
  void require_device(const char* call) const;
  // Checks [p, p+bytes) lies inside this PE's heap; throws shoal::error naming `call` otherwise.
  std::uint64_t offset_of(const void* p, std::size_t bytes, const char* call) const;
  void check_pe(int pe, const char* call) const;
  // A put or get of no bytes with a null symmetric pointer (malloc(0)'s): checks the PE, and says there is
  // nothing more to do.
  bool nothing_to_move(const void* symmetric, std::size_t bytes, int pe, const char* call) const {
    if (bytes != 0 || symmetric != nullptr) return false;
    check_pe(pe, call);
    return true;
  }
  // The bodies of world's heap calls and device_handle(), for owners that keep the impl (teams: the
  // impl stays put when a world is moved).
  void* align(std::size_t alignment, std::size_t bytes, const char* call);  // `call` names the user's call in errors
  void* calloc(std::size_t count, std::size_t size);
  // align(alignment, count * size) for `call` (calloc, malloc_array): refused on every PE when count * size
  // overflows on one.
  void* align_array(std::size_t alignment, std::size_t count, std::size_t size, const char* call);
  void free(void* p);
  shoal::device_handle device_handle() const;

  // Throws unless [p, p + bytes) lies in this PE's heap or in one registered buffer.
  void check_symmetric(const void* p, std::size_t bytes, const char* call) const;
  // ptr() with the checks, throwing when `pe` is not load/store reachable.
  void* reachable(const void* p, std::size_t bytes, int pe, const char* call) const;
};

}  // namespace shoal
