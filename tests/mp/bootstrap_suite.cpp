// The bootstrap suite (BootstrapTest.*): every PE of a job runs the same tests in the same order, so
// the collectives line up; checks are non-fatal (EXPECT) so that a wrong value on one PE does not
// desynchronise the others. The binary that links it says how the job's bootstrap is made
// (bootstrap_suite.hpp): shoal_mp_tests from the launcher's environment, shoal_mpi_tests from an MPI
// communicator.
#include "bootstrap_suite.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/open_file_limit.hpp"
#include "bootstrap/pe_vote.hpp"
#include "shoal/error.hpp"

namespace {

// The job's bootstrap, made once per process (it is collective, so every PE makes it at the same point).
// Made directly rather than through shoal::init so that these tests need no GPU.
std::unique_ptr<shoal::bootstrap> g_boot;

class BootstrapTest : public ::testing::Test {
 protected:
  // Made at the first test of this suite, which is the same point on every PE. The fault tests of this
  // binary (fault_tests.cpp) never make one: they run outside any job and start jobs of their own.
  static void SetUpTestSuite() {
    if (!g_boot) g_boot = shoal_mp::make_job_bootstrap();
  }
  shoal::bootstrap& boot() { return *g_boot; }
  int pe() { return boot().pe(); }
  int n_pes() { return boot().n_pes(); }
};

// Deterministic data every PE can recompute: block `index` of PE `pe` in test step `step`.
std::vector<unsigned char> block_of(int pe, std::uint64_t step, int index, std::size_t bytes) {
  std::mt19937_64 rng(std::uint64_t(pe) * 1000003u + step * 7919u + std::uint64_t(index) * 104729u + 17u);
  std::vector<unsigned char> out(bytes);
  for (auto& b : out) b = static_cast<unsigned char>(rng());
  return out;
}

constexpr std::size_t kSizes[] = {0, 1, 7, 64, 4096, 100000, std::size_t{1} << 20};

void check_all_gather(shoal::bootstrap& b, std::uint64_t step, std::size_t bytes) {
  int n = b.n_pes();
  std::vector<unsigned char> mine = block_of(b.pe(), step, 0, bytes);
  std::vector<unsigned char> all(bytes * n, 0xee);
  b.all_gather(mine.data(), all.data(), bytes);
  for (int p = 0; p < n; ++p)
    EXPECT_TRUE(std::equal(all.begin() + p * bytes, all.begin() + (p + 1) * bytes, block_of(p, step, 0, bytes).begin()))
        << "block of PE " << p << " (" << bytes << " bytes, step " << step << ")";
}

void check_broadcast(shoal::bootstrap& b, std::uint64_t step, std::size_t bytes, int root) {
  std::vector<unsigned char> data =
      b.pe() == root ? block_of(root, step, 0, bytes) : std::vector<unsigned char>(bytes, 0xee);
  b.broadcast(data.data(), bytes, root);
  EXPECT_EQ(data, block_of(root, step, 0, bytes)) << bytes << " bytes from root " << root;
}

void check_alltoall(shoal::bootstrap& b, std::uint64_t step, std::size_t bytes) {
  int n = b.n_pes();
  std::vector<unsigned char> send, recv(bytes * n, 0xee);
  for (int q = 0; q < n; ++q) {
    auto blk = block_of(b.pe(), step, q, bytes);  // what this PE sends to q
    send.insert(send.end(), blk.begin(), blk.end());
  }
  b.alltoall(send.data(), recv.data(), bytes);
  for (int p = 0; p < n; ++p)
    EXPECT_TRUE(
        std::equal(recv.begin() + p * bytes, recv.begin() + (p + 1) * bytes, block_of(p, step, b.pe(), bytes).begin()))
        << "block from PE " << p << " (" << bytes << " bytes)";
}

TEST_F(BootstrapTest, Topology) {
  EXPECT_GE(pe(), 0);
  EXPECT_LT(pe(), n_pes());
  if (const char* rank = std::getenv("SHOAL_RANK")) {
    EXPECT_EQ(pe(), std::atoi(rank));
  }
  if (const char* size = std::getenv("SHOAL_WORLD_SIZE")) {
    EXPECT_EQ(n_pes(), std::atoi(size));
  }
  std::span<const int> mine = boot().node_pes();
  ASSERT_EQ(static_cast<int>(mine.size()), boot().local_size());
  EXPECT_EQ(mine[boot().local_pe()], pe());
  EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));

  // Every PE's view of its node must agree with every other PE's.
  int me[2] = {boot().node(), boot().local_pe()};
  std::vector<int> all(2 * n_pes());
  boot().all_gather(me, all.data(), sizeof me);
  int max_node = 0;
  for (int p = 0; p < n_pes(); ++p) max_node = std::max(max_node, all[2 * p]);
  EXPECT_EQ(boot().n_nodes(), max_node + 1);
  std::vector<int> same_node;
  for (int p = 0; p < n_pes(); ++p)
    if (all[2 * p] == boot().node()) same_node.push_back(p);
  EXPECT_EQ(std::vector<int>(mine.begin(), mine.end()), same_node);
  for (std::size_t i = 0; i < same_node.size(); ++i) EXPECT_EQ(all[2 * same_node[i] + 1], static_cast<int>(i));

  // All PEs of a shoalrun job share a host: SHOAL_EMULATE_NODES=k gives min(k, n) contiguous nodes.
  int k = std::getenv("SHOAL_EMULATE_NODES") ? std::atoi(std::getenv("SHOAL_EMULATE_NODES")) : 1;
  if (std::getenv("SHOAL_NODE_ID") == nullptr) {
    int expect_nodes = std::min(k, n_pes());
    EXPECT_EQ(boot().n_nodes(), expect_nodes);
    int base = n_pes() / expect_nodes, extra = n_pes() % expect_nodes;
    int first = 0;
    for (int node = 0; node < boot().node(); ++node) first += base + (node < extra ? 1 : 0);
    EXPECT_EQ(mine.front(), first);
  }
}

TEST_F(BootstrapTest, AllGather) {
  std::uint64_t step = 100;
  for (std::size_t bytes : kSizes) check_all_gather(boot(), step++, bytes);
}

TEST_F(BootstrapTest, BroadcastFromEveryRoot) {
  std::uint64_t step = 200;
  for (int root = 0; root < n_pes(); ++root)
    for (std::size_t bytes : {std::size_t{0}, std::size_t{5}, std::size_t{4096}, std::size_t{300000}})
      check_broadcast(boot(), step++, bytes, root);
}

TEST_F(BootstrapTest, Alltoall) {
  std::uint64_t step = 300;
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{33}, std::size_t{8192}, std::size_t{131072}})
    check_alltoall(boot(), step++, bytes);
}

// A barrier orders side effects: files each PE creates before it must all be visible after it.
// Each PE leaves a file per round before the barrier; after it, every PE must see every file of the round.
// A barrier that let a PE through early fails this.
void check_barrier_orders_side_effects(shoal::bootstrap& b, int rounds) {
  char dir[256] = {};
  if (b.pe() == 0) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "shoal-mp-XXXXXX").string();
    std::strncpy(dir, tmpl.c_str(), sizeof dir - 1);
    ASSERT_NE(::mkdtemp(dir), nullptr);
  }
  b.broadcast(dir, sizeof dir, 0);
  for (int round = 0; round < rounds; ++round) {
    std::ofstream(std::string(dir) + "/" + std::to_string(round) + "." + std::to_string(b.pe())) << b.pe();
    b.barrier();
    for (int p = 0; p < b.n_pes(); ++p)
      EXPECT_TRUE(std::filesystem::exists(std::string(dir) + "/" + std::to_string(round) + "." + std::to_string(p)))
          << "round " << round << ": PE " << p << "'s file is missing after the barrier";
  }
  b.barrier();  // everyone checked before PE 0 removes the directory
  if (b.pe() == 0) std::filesystem::remove_all(dir);
}

TEST_F(BootstrapTest, BarrierOrdersSideEffects) { check_barrier_orders_side_effects(boot(), 5); }

// Many collectives back to back, kinds, sizes and roots drawn from one seed that all PEs share.
TEST_F(BootstrapTest, MixedSequence) {
  std::mt19937 plan(12345);
  for (std::uint64_t step = 1000; step < 1300; ++step) {
    std::size_t bytes = plan() % 3 == 0 ? 0 : plan() % 2000;
    if (plan() % 50 == 0) bytes = std::size_t{1} << 20;
    switch (plan() % 4) {
      case 0:
        check_all_gather(boot(), step, bytes);
        break;
      case 1:
        check_broadcast(boot(), step, bytes, static_cast<int>(plan() % static_cast<unsigned>(n_pes())));
        break;
      case 2:
        boot().barrier();
        break;
      case 3:
        check_alltoall(boot(), step, bytes / static_cast<std::size_t>(n_pes()));
        break;
    }
  }
}

// A fresh memfd holding {pe, tag}: a descriptor whose sender and place in a message the receiver can read.
int make_tagged_file(int pe, int tag) {
  int fd = ::memfd_create("shoal-mp-fd", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  int value[2] = {pe, tag};
  EXPECT_EQ(::pwrite(fd, value, sizeof value, 0), static_cast<ssize_t>(sizeof value));
  return fd;
}

// Checks that `fd` is make_tagged_file(pe, tag)'s file, and closes it.
void expect_tagged_file(int fd, int pe, int tag, const char* otherwise) {
  int value[2] = {-1, -1};
  EXPECT_EQ(::pread(fd, value, sizeof value, 0), static_cast<ssize_t>(sizeof value));
  EXPECT_EQ(value[0], pe);
  EXPECT_EQ(value[1], tag) << otherwise;
  ::close(fd);
}

// Each PE puts its pe into a fresh memfd and sends it (three descriptors per message) to every PE of
// its node; receivers read the files back.
TEST_F(BootstrapTest, FdPassingToEveryLocalPeer) {
  auto make_file = [&](int tag) { return make_tagged_file(pe(), tag); };
  int local_size = boot().local_size();
  for (int peer = 0; peer < local_size; ++peer) {
    int fds[3] = {make_file(peer * 10), make_file(peer * 10 + 1), make_file(peer * 10 + 2)};
    boot().send_fds(peer, fds);
    for (int fd : fds) ::close(fd);  // the receiver has its own descriptors
  }
  // Receive in reverse order: messages of other senders arrive first and must wait for their turn.
  for (int peer = local_size - 1; peer >= 0; --peer) {
    std::vector<int> got = boot().recv_fds(peer, 3);
    ASSERT_EQ(got.size(), 3u);
    for (int i = 0; i < 3; ++i)
      expect_tagged_file(got[i], boot().node_pes()[peer], boot().local_pe() * 10 + i, "descriptors out of order");
  }
  boot().barrier();
}

// A receiver at its limit of open files loses the descriptors the kernel cannot install. Its recv_fds
// must say so (not hand back fewer, nor drop the connection), and the next exchange on the same channel
// must carry exactly the descriptors sent after the lost ones. The heap's growth relies on both.
TEST_F(BootstrapTest, FdsLostAtTheOpenFileLimitFailThatRecvAndNotTheNext) {
  int local_size = boot().local_size();
  auto send_tagged = [&](int count, int tag) {
    for (int peer = 0; peer < local_size; ++peer) {
      std::vector<int> fds;
      for (int i = 0; i < count; ++i) fds.push_back(make_tagged_file(pe(), tag + i));
      boot().send_fds(peer, fds);
      for (int fd : fds) ::close(fd);
    }
  };
  // Every connection is made before the limit is lowered: accepting one takes a descriptor too.
  send_tagged(1, 0);
  for (int peer = 0; peer < local_size; ++peer)
    for (int fd : boot().recv_fds(peer, 1)) ::close(fd);
  boot().barrier();

  constexpr int kMany = 64;
  send_tagged(kMany, 100);
  boot().barrier();  // every message is on its way before any receiver lowers its limit
  int failures = 0;
  rlim_t low = 0;
  {
    shoal_test::open_file_limit limit(4);  // far fewer than the kMany of one message
    ASSERT_TRUE(limit.ok());
    low = limit.limit();
    for (int peer = 0; peer < local_size; ++peer) {
      try {
        for (int fd : boot().recv_fds(peer, kMany)) ::close(fd);
      } catch (const shoal::error& e) {
        ++failures;
        EXPECT_EQ(e.category(), shoal::errc::system) << e.what();
        EXPECT_NE(std::string(e.what()).find("limit of open files"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GE(failures, 1) << "no descriptor was lost under a limit of " << low;
  boot().barrier();  // no PE sends again while a receiver may still be at its low limit

  send_tagged(3, 200);
  for (int peer = 0; peer < local_size; ++peer) {
    std::vector<int> got = boot().recv_fds(peer, 3);
    ASSERT_EQ(got.size(), 3u);
    for (int i = 0; i < 3; ++i)
      expect_tagged_file(got[i], boot().node_pes()[peer], 200 + i,
                         "a descriptor of the lost message was taken as a new one");
  }
  boot().barrier();
}

TEST_F(BootstrapTest, FdPassingOutsideTheNodeIsRejected) {
  int fd = ::memfd_create("x", MFD_CLOEXEC);
  try {
    boot().send_fds(boot().local_size(), std::span(&fd, 1));
    ADD_FAILURE() << "send_fds to a PE outside the node was accepted";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.category(), shoal::errc::invalid_argument) << e.what();
  }
  EXPECT_THROW(boot().recv_fds(-1, 1), shoal::error);
  ::close(fd);
}

TEST_F(BootstrapTest, ArgumentErrorsDoNotBreakTheJob) {
  char c = 0;
  EXPECT_THROW(boot().broadcast(&c, 1, n_pes()), shoal::error);
  check_all_gather(boot(), 7100, 64);  // the next collective still carries every PE's data
}

// Whether `vote` (one collective call in which the last PE's `step` throws) fails on every PE: that PE with its
// own exception, the others with an error of "test call" in `others_category` naming it.
template <class Vote, class Step>
void expect_failure_on_every_pe(shoal::bootstrap& boot, Vote vote, Step step, shoal::errc others_category) {
  const int failing = boot.n_pes() - 1;
  try {
    vote(step);
    ADD_FAILURE() << "PE " << boot.pe() << " returned though PE " << failing << "'s step threw";
  } catch (const shoal::error& e) {
    if (boot.pe() == failing) {
      EXPECT_EQ(e.context(), "test step") << e.what();
    } else {
      EXPECT_EQ(e.category(), others_category) << e.what();
      EXPECT_EQ(e.context(), "test call") << e.what();
      EXPECT_NE(e.detail().find("PE " + std::to_string(failing) + " could not take its step"), std::string::npos)
          << e.what();
    }
  } catch (const std::exception& e) {
    EXPECT_EQ(boot.pe(), failing) << "only the failed PE rethrows a foreign exception: " << e.what();
    EXPECT_STREQ(e.what(), "test step's own");
  }
}

// Both ways a step can fail on the last PE: a shoal::error, which reaches the others in its category, and
// something else, which reaches them as `internal`.
template <class Vote>
void expect_failures_on_one_pe_fail_every_pe(shoal::bootstrap& boot, Vote vote) {
  const bool failing = boot.pe() == boot.n_pes() - 1;
  expect_failure_on_every_pe(
      boot, vote,
      [&] {
        if (failing) throw shoal::error(shoal::errc::cuda, "test step", "failed here");
      },
      shoal::errc::cuda);
  expect_failure_on_every_pe(
      boot, vote,
      [&] {
        if (failing) throw std::runtime_error("test step's own");
      },
      shoal::errc::internal);
}

// A collective call's step that throws on one PE fails the call on every PE; the job goes on.
TEST_F(BootstrapTest, StepFailingOnOnePeFailsTheCallOnEvery) {
  expect_failures_on_one_pe_fail_every_pe(
      boot(), [&](auto step) { shoal::detail::run_on_every_pe(boot(), "test call", "take its step", step); });
  int steps = 0;
  EXPECT_NO_THROW(shoal::detail::run_on_every_pe(boot(), "test call", "take its step", [&] { ++steps; }));
  EXPECT_EQ(steps, 1);
  check_all_gather(boot(), 7200, 64);  // the next collective still carries every PE's data
}

// The vote with a payload (free's agreement after waiting for its device): a failure on one PE fails it on
// every PE as above; otherwise every PE gets every PE's payload, an odd size so the vote byte sits unaligned.
TEST_F(BootstrapTest, GatherWithVoteCarriesEveryPayloadOrFailsOnEvery) {
  struct payload {
    std::uint64_t word;
    char tail[5];
  };
  auto gather = [&](const std::exception_ptr& mine) {
    const payload own{0x9e3779b97f4a7c15ull * std::uint64_t(pe() + 1), {char('a' + pe() % 26), 1, 2, 3, 4}};
    return shoal::detail::all_gather_unless_any_pe_failed(boot(), own, mine, "test call", "take its step");
  };
  expect_failures_on_one_pe_fail_every_pe(
      boot(), [&](auto step) { gather(shoal::detail::failure_of(step)); });
  const std::vector<payload> all = gather(nullptr);
  ASSERT_EQ(all.size(), std::size_t(n_pes()));
  for (int from = 0; from < n_pes(); ++from) {
    EXPECT_EQ(all[from].word, 0x9e3779b97f4a7c15ull * std::uint64_t(from + 1)) << "from PE " << from;
    EXPECT_EQ(all[from].tail[0], char('a' + from % 26)) << "from PE " << from;
    EXPECT_EQ(all[from].tail[4], 4) << "from PE " << from;
  }
  check_all_gather(boot(), 7300, 64);
}

// A second bootstrap beside the first (a second shoal::init in one process), then the first again.
TEST_F(BootstrapTest, SecondBootstrapInTheSameProcess) {
  {
    std::unique_ptr<shoal::bootstrap> second = shoal_mp::make_job_bootstrap();
    EXPECT_EQ(second->pe(), pe());
    check_all_gather(*second, 5000, 100);
  }
  check_all_gather(boot(), 5001, 100);
}

// The light set for large jobs (64 PEs on a small machine).
TEST_F(BootstrapTest, LightAllGather) {
  check_all_gather(boot(), 7000, 8);
  check_all_gather(boot(), 7001, 4096);
}

TEST_F(BootstrapTest, LightBarrier) { check_barrier_orders_side_effects(boot(), 3); }

}  // namespace

void shoal_mp::release_job_bootstrap() { g_boot.reset(); }
