// Shared by the network tests: the job's network (made once per process, collectively), reproducible
// random bytes, completion counters, and a bounded progress loop.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "base/run_while_polling.hpp"
#include "shoal/bootstrap.hpp"
#include "transport/network.hpp"

namespace shoal_mp {

namespace net = shoal::detail;

inline std::unique_ptr<shoal::bootstrap> g_net_boot;  // the network suite's own bootstrap
inline std::unique_ptr<net::network> g_net;

// Runs a bootstrap collective on a helper thread while this thread keeps progressing `nw`: over TCP a peer
// may need this PE's progress (its flush, an emulated atomic) before it can reach the same collective.
inline void with_progress(net::network& nw, const std::function<void()>& fn) {
  shoal::detail::run_while_polling(fn, [&] { return nw.progress(); });
}

// Every test of this suite runs on every PE in the same order. The network is made at the first test and
// closed after the last, both collectively.
class NetworkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!net::ucx_network_available() || std::getenv("SHOAL_MP_NETWORK_FAULT")) return;
    if (!g_net_boot) g_net_boot = shoal::make_bootstrap_from_env();
    if (!g_net) g_net = net::make_ucx_network(*g_net_boot);
  }
  static void TearDownTestSuite() {
    if (g_net) {
      with_progress(*g_net, [] { g_net_boot->barrier(); });  // nobody closes while another still needs it
      g_net.reset();
    }
    g_net_boot.reset();
  }
  void SetUp() override {
    if (!net::ucx_network_available()) GTEST_SKIP() << "no UCX in this build: " << net::describe_ucx_network();
    if (!g_net) GTEST_SKIP() << "not in a network test job";
  }
  net::network& nw() { return *g_net; }
  void barrier() {
    with_progress(*g_net, [] { g_net_boot->barrier(); });
  }
  shoal::bootstrap& boot() { return *g_net_boot; }
  int pe() { return g_net->pe(); }
  int n_pes() { return g_net->n_pes(); }
};

struct splitmix {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

// Bytes that depend only on `seed` and the position.
inline void fill(std::span<std::byte> out, std::uint64_t seed) {
  splitmix rng{seed};
  for (std::size_t i = 0; i < out.size(); i += 8) {
    std::uint64_t v = rng.next();
    for (std::size_t j = 0; j < 8 && i + j < out.size(); ++j) out[i + j] = static_cast<std::byte>(v >> (8 * j));
  }
}

inline bool matches(std::span<const std::byte> got, std::uint64_t seed) {
  std::vector<std::byte> want(got.size());
  fill(want, seed);
  return std::equal(got.begin(), got.end(), want.begin());
}

inline std::size_t first_difference(std::span<const std::byte> a, std::span<const std::byte> b) {
  return static_cast<std::size_t>(std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
}

// Counts completions; keeps the value each one reported, in completion order.
struct counter {
  std::size_t completed = 0;
  std::size_t failed = 0;  // any status but ok
  std::size_t peer_failed = 0;
  std::vector<std::uint64_t> values;
  static void on_done(void* ctx, net::network_status status, std::uint64_t value) {
    auto* c = static_cast<counter*>(ctx);
    ++c->completed;
    if (status != net::network_status::ok) ++c->failed;
    if (status == net::network_status::peer_failed) ++c->peer_failed;
    c->values.push_back(value);
  }
  net::network_done done() { return {on_done, this}; }
};

// Progresses until `until()` holds. The deadline only keeps a broken network from hanging the job: it
// is far beyond what any test needs, so reaching it is a failure, not a measurement.
template <typename Until>
bool drive(net::network& nw, Until until, const char* what, double seconds = 120) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!until()) {
    if (!nw.progress()) std::this_thread::yield();
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "no progress on " << what << " within " << seconds << " s";
      return false;
    }
  }
  return true;
}

}  // namespace shoal_mp
