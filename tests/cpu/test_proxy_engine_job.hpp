// A job of N PEs in one process for the proxy engine's CPU tests: each PE has a host heap filled with
// random bytes, its own ring, a loopback network of one shared fabric and (unless told otherwise) an engine.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "transport/local_memory.hpp"
#include "transport/loopback_network.hpp"
#include "transport/proxy_engine.hpp"
#include "transport/proxy_engine_host.hpp"
#include "shoal/detail/proxy_ring.hpp"

namespace shoal::detail::engine_test {

using namespace std::chrono_literals;

// Generous: a wait that reaches it failed the test (it is never a timing assertion on a healthy run).
inline constexpr auto kPatience = std::chrono::seconds(60);

struct job_options {
  int n_pes = 2;
  int engines = -1;  // PEs 0 .. engines - 1 get an engine; -1: all
  std::uint64_t heap_bytes = 1 << 20;
  proxy_ring_layout ring{.capacity = 64, .window = 256, .result_slots = 64};
  std::uint64_t first_sequence = 0;
  loopback_options network{};
  proxy_engine_options engine{};
  std::size_t lend_slots = 0;     // payload buffers each PE's memory lends (of engine.chunk_bytes each)
  bool deferred_flushes = false;  // each PE's memory completes flushes late (host_memory_knobs)
  bool windows = false;           // the lent buffers live in network payload windows (open_payload_windows)
  std::function<void()> before_flush_begin;  // runs in every PE's memory at each flush_begin (host_memory_knobs)
  std::function<bool()> flushes_held;        // while true, no PE's flush completes (host_memory_knobs)
  std::uint64_t seed = 1;
};

struct job_pe {
  std::vector<std::uint64_t> heap;              // 8-byte aligned
  std::vector<proxy_descriptor> ring_storage;   // 64-byte aligned
  std::uint64_t head = 0;
  proxy_ring_view ring{};
  std::unique_ptr<host_local_memory> memory;
  std::unique_ptr<network> net;
  std::unique_ptr<proxy_engine> engine;         // after net: destroyed first

  std::byte* base() { return reinterpret_cast<std::byte*>(heap.data()); }
  template <typename T>
  T load(std::uint64_t offset) {
    T v;
    std::memcpy(&v, base() + offset, sizeof v);
    return v;
  }
  std::uint64_t load_atomic(std::uint64_t offset) {
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base() + offset)).load();
  }
};

// One PE's heap (random bytes from `rng`), initialized ring and host_local_memory, as o.heap_bytes, o.ring
// and o.first_sequence say; no network and no engine yet (the caller adds them: a loopback fabric's here,
// UCX in tests/mp/proxy_over_ucx_tests.cpp).
inline std::unique_ptr<job_pe> make_job_pe(const job_options& o, std::mt19937_64& rng) {
  auto pe = std::make_unique<job_pe>();
  pe->heap.resize((o.heap_bytes + 7) / 8);
  for (auto& w : pe->heap) w = rng();
  pe->ring_storage.resize((o.ring.shared_bytes() + 63) / 64);
  pe->ring = o.ring.carve(pe->ring_storage.data(), &pe->head);
  proxy_ring_initialize(pe->ring, o.first_sequence);
  pe->memory = std::make_unique<host_local_memory>(pe->base(), o.heap_bytes,
                                                   host_memory_knobs{.slots = o.lend_slots,
                                                                     .slot_bytes = o.engine.chunk_bytes,
                                                                     .deferred_flushes = o.deferred_flushes,
                                                                     .before_flush_begin = o.before_flush_begin,
                                                                     .flushes_held = o.flushes_held});
  return pe;
}

// What the runtime does (host/proxy_runtime.cpp): open the network's payload window of o.lend_slots chunks,
// lend from it, adopt the peers' views. Collective over the job's networks.
inline void open_payload_windows(job_pe& pe, const job_options& o) {
  const payload_view_check adopt{.fn = [](void* ctx, std::span<const std::byte> view) {
                                   return static_cast<local_memory*>(ctx)->adopt_peer_window(view);
                                 },
                                 .ctx = pe.memory.get()};
  const std::span<std::byte> window = pe.net->open_payload_window(o.lend_slots * o.engine.chunk_bytes, adopt);
  if (!window.empty()) {
    EXPECT_TRUE(pe.memory->lend_from(window));
  }
}

class engine_job {
 public:
  explicit engine_job(const job_options& o) : options(o), fabric(o.n_pes, o.network) {
    const int engines = o.engines < 0 ? o.n_pes : o.engines;
    std::mt19937_64 rng(o.seed);
    for (int p = 0; p < o.n_pes; ++p) {
      auto pe = make_job_pe(o, rng);
      pe->net = fabric.connect(p);
      pes.push_back(std::move(pe));
    }
    if (o.windows) {  // collective: one thread per PE
      std::vector<std::thread> openers;
      for (auto& pe : pes) openers.emplace_back([&o, &pe] { open_payload_windows(*pe, o); });
      for (std::thread& t : openers) t.join();
    }
    for (int p = 0; p < engines; ++p)
      pes[p]->engine = std::make_unique<proxy_engine>(pes[p]->ring, *pes[p]->net, *pes[p]->memory, limits(), o.engine);
  }

  proxy_limits limits() const {
    return {.n_pes = options.n_pes, .heap_bytes = options.heap_bytes, .completion_slots = options.ring.result_slots};
  }
  int n_pes() const { return options.n_pes; }
  job_pe& operator[](int pe) { return *pes[pe]; }

  void start() {
    for (auto& pe : pes)
      if (pe->engine) pe->engine->start();
  }
  // Stops every engine; a failure shows as a test failure.
  void stop_all() {
    for (std::size_t p = 0; p < pes.size(); ++p) {
      if (!pes[p]->engine) continue;
      try {
        pes[p]->engine->stop();
      } catch (const error& e) {
        ADD_FAILURE() << "engine of PE " << p << ": " << e.what();
      }
    }
  }

  job_options options;
  loopback_fabric fabric;
  std::vector<std::unique_ptr<job_pe>> pes;
};

inline std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

}  // namespace shoal::detail::engine_test
