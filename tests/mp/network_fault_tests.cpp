// A PE dies while the others have network operations in flight to it. NetworkFaults (outside any job)
// starts a job of this binary by hand, like the bootstrap fault tests, over each kind of UCX transport;
// NetworkFaultJob.PlayPart is what each PE of that job runs (skipped anywhere else). The survivors must
// see peer_failed completions for what they sent to the dead PE, within a bound, then keep working with
// each other and shut down; nobody may hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "network_test_util.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"
#include "spawn.hpp"

namespace shoal_mp {
namespace {

constexpr int kVictimExit = 7;

struct notes {
  int go = 0;        // survivors whose operations are in flight (the victim counts them)
  int done = 0;      // survivors that finished their checks
  long traffic = 0;  // messages from the survivors' stream (the victim counts them)
  static void on_go(void* ctx, const net::network_message&) { ++static_cast<notes*>(ctx)->go; }
  static void on_done(void* ctx, const net::network_message&) { ++static_cast<notes*>(ctx)->done; }
};

TEST(NetworkFaultJob, PlayPart) {
  const char* spec = std::getenv("SHOAL_MP_NETWORK_FAULT");
  if (!spec) GTEST_SKIP() << "only a PE of a NetworkFaults job plays this";
  const int victim = std::atoi(spec);
  std::unique_ptr<shoal::bootstrap> boot = shoal::make_bootstrap_from_env();
  // Everything the network's operations and completions touch outlives it (declared before it).
  std::vector<std::uint64_t> memory(1 << 15, 0);
  std::vector<std::byte> source(4096), sink(64 * 4096);
  counter ops, after, alive;
  notes seen;
  std::unique_ptr<net::network> nw = net::make_ucx_network(*boot);
  const int me = nw->pe(), n = nw->n_pes();
  const net::network_region region = nw->expose(memory.data(), memory.size() * 8, net::memory_kind::host);
  nw->on_message(1, notes::on_go, &seen);
  nw->on_message(2, notes::on_done, &seen);
  nw->on_message(
      3, [](void* ctx, const net::network_message&) { ++static_cast<notes*>(ctx)->traffic; }, &seen);
  with_progress(*nw, [&] { boot->barrier(); });

  if (me == victim) {
    // Die once every survivor has operations in flight here, without closing anything.
    drive(
        *nw, [&] { return seen.go >= n - 1; }, "the survivors' go", 60);
    std::fflush(nullptr);
    ::_exit(kVictimExit);
  }

  // Keep up to 64 operations of every kind in flight to the victim until one of them fails.
  std::size_t issued = 0;
  bool go_sent = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ops.peer_failed == 0 && std::chrono::steady_clock::now() < deadline) {
    while (issued - ops.completed < 64) {
      const std::uint64_t slot = issued % 64;
      switch (issued % 4) {
        case 0:
          nw->put(victim, source.data(), source.size(), region, slot * 4096, ops.done());
          break;
        case 1:
          nw->get(victim, sink.data() + slot * 4096, 4096, region, slot * 4096, ops.done());
          break;
        case 2:
          nw->atomic(victim, net::network_atomic::add, 8, true, region, 8 * slot, 1, 0, ops.done());
          break;
        case 3:
          nw->send(victim, 3, {}, source, ops.done());
          break;
      }
      ++issued;
    }
    if (!go_sent) nw->send(victim, 1, {}, {}, {});  // go: the victim may die now
    go_sent = true;
    if (!nw->progress()) std::this_thread::yield();
  }
  ASSERT_GT(ops.peer_failed, 0u) << "PE " << me << ": no operation to PE " << victim << " failed within 60 s ("
                                 << ops.completed << " of " << issued << " completed)";
  // Everything still in flight ends, one way or the other; new operations and flushes to it fail at once.
  EXPECT_TRUE(drive(
      *nw, [&] { return ops.completed == issued; }, "the rest of the operations to the dead PE", 60));
  nw->put(victim, source.data(), 8, region, 0, after.done());
  nw->flush(victim, after.done());
  nw->flush(net::kNetworkAllPes, after.done());
  EXPECT_TRUE(drive(
      *nw, [&] { return after.completed == 3; }, "operations after the failure", 60));
  EXPECT_EQ(after.peer_failed, 3u);
  std::printf("survivor PE %d: PE %d failed: %zu peer_failed completions of %zu operations\n", me, victim,
              ops.peer_failed, issued);

  // The survivors still reach each other: a put and a flush to every other survivor, then a message that
  // says so; nobody closes before every survivor is done.
  int others = 0;
  for (int q = 0; q < n; ++q) {
    if (q == victim || q == me) continue;
    nw->put(q, source.data(), source.size(), region, 4096 * (me + 1), alive.done());
    nw->flush(q, alive.done());
    others += 2;
  }
  EXPECT_TRUE(drive(
      *nw, [&] { return alive.completed == static_cast<std::size_t>(others); }, "survivors", 60));
  EXPECT_EQ(alive.failed, 0u);
  for (int q = 0; q < n; ++q)
    if (q != victim && q != me) nw->send(q, 2, {}, {}, {});
  EXPECT_TRUE(drive(
      *nw, [&] { return seen.done == n - 2; }, "the other survivors' done", 60));
  nw.reset();  // closes the dead PE's endpoint by force; must not hang
  std::printf("survivor PE %d: shut down\n", me);
}

// --- the driver

std::string self_path() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

class NetworkFaults : public ::testing::TestWithParam<const char*> {};

TEST_P(NetworkFaults, PeExitsWithOperationsInFlight) {
  if (!net::ucx_network_available()) GTEST_SKIP() << "no UCX in this build: " << net::describe_ucx_network();
  ::unsetenv("UCX_TLS");  // the job's transports are this test's parameter
  constexpr int kPes = 3, kVictim = 2;
  const std::string addr = "127.0.0.1:" + std::to_string(free_port());
  process_group group;
  for (int pe = 0; pe < kPes; ++pe)
    group.start({{self_path(), "--gtest_filter=NetworkFaultJob.PlayPart"},
                 {{"SHOAL_RANK", std::to_string(pe)},
                  {"SHOAL_WORLD_SIZE", std::to_string(kPes)},
                  {"SHOAL_LOCAL_RANK", std::to_string(pe)},
                  {"SHOAL_LOCAL_SIZE", std::to_string(kPes)},
                  {"SHOAL_BOOTSTRAP_ADDR", addr},
                  {"SHOAL_BOOTSTRAP_SECRET", "00112233445566778899aabbccddeeff"},
                  {"SHOAL_BOOTSTRAP_TIMEOUT", "10"},
                  {"SHOAL_MP_NETWORK_FAULT", std::to_string(kVictim)},
                  {"UCX_TLS", GetParam()},
                  // Shared memory notices a dead peer only through UCX's keepalive (20 s by default).
                  {"UCX_KEEPALIVE_INTERVAL", "1s"}}});
  std::vector<process_end> ends = group.wait(150);
  EXPECT_EQ(ends[kVictim].exit_code(), kVictimExit) << ends[kVictim].output;
  for (int pe = 0; pe < kPes; ++pe) {
    if (pe == kVictim) continue;
    EXPECT_FALSE(ends[pe].killed_by_driver) << "PE " << pe << " hung:\n" << ends[pe].output;
    EXPECT_EQ(ends[pe].exit_code(), 0) << "PE " << pe << ":\n" << ends[pe].output;
    EXPECT_NE(ends[pe].output.find("PE " + std::to_string(kVictim) + " failed"), std::string::npos)
        << "PE " << pe << ":\n"
        << ends[pe].output;
    EXPECT_NE(ends[pe].output.find("shut down"), std::string::npos) << "PE " << pe << ":\n" << ends[pe].output;
  }
  if (HasFailure()) std::printf("PE %d (the victim):\n%s\n", kVictim, ends[kVictim].output.c_str());
}

INSTANTIATE_TEST_SUITE_P(Transports, NetworkFaults, ::testing::Values("tcp", "posix,sysv,cma,self"),
                         [](const auto& info) { return std::string(info.index == 0 ? "tcp" : "shm"); });

}  // namespace
}  // namespace shoal_mp
