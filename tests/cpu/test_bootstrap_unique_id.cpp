// The NCCL-style start (make_unique_id + make_bootstrap) with several PEs as threads of this process:
// the full TCP bootstrap, collectives and descriptor passing, without any launcher.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <numeric>
#include <thread>
#include <vector>

#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"

namespace shoal {
namespace {

// Runs `body(bootstrap)` on `n` threads, one PE each, all from one unique id.
template <typename Body>
void run_pes(int n, Body body) {
  unique_id id = make_unique_id();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  for (int pe = 0; pe < n; ++pe)
    threads.emplace_back([&, pe] {
      try {
        std::unique_ptr<bootstrap> b = make_bootstrap(id, pe, n);
        body(*b);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(pe)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int pe = 0; pe < n; ++pe) EXPECT_EQ(errors[static_cast<std::size_t>(pe)], "") << "PE " << pe;
}

constexpr int kPes = 3;

TEST(BootstrapUniqueId, ThreadsAsPes) {
  run_pes(kPes, [](bootstrap& b) {
    EXPECT_EQ(b.n_pes(), kPes);
    EXPECT_EQ(b.n_nodes(), 1);
    EXPECT_EQ(b.local_size(), kPes);
    EXPECT_EQ(b.local_pe(), b.pe());

    std::vector<int> all(kPes);
    int mine = 100 + b.pe();
    b.all_gather(&mine, all.data(), sizeof mine);
    EXPECT_EQ(all, (std::vector<int>{100, 101, 102}));

    long value = b.pe() == 2 ? 4242 : 0;
    b.broadcast(&value, sizeof value, 2);
    EXPECT_EQ(value, 4242);

    std::vector<int> send(kPes), recv(kPes);
    for (int q = 0; q < kPes; ++q) send[static_cast<std::size_t>(q)] = b.pe() * 10 + q;
    b.alltoall(send.data(), recv.data(), sizeof(int));
    for (int p = 0; p < kPes; ++p) EXPECT_EQ(recv[static_cast<std::size_t>(p)], p * 10 + b.pe());

    int next = (b.pe() + 1) % kPes, prev = (b.pe() + kPes - 1) % kPes;
    int fd = ::memfd_create("unique-id-test", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    int pe = b.pe();
    ASSERT_EQ(::pwrite(fd, &pe, sizeof pe, 0), static_cast<ssize_t>(sizeof pe));
    b.send_fds(next, std::span(&fd, 1));
    ::close(fd);
    std::vector<int> got = b.recv_fds(prev, 1);
    ASSERT_EQ(got.size(), 1u);
    int from = -1;
    EXPECT_EQ(::pread(got[0], &from, sizeof from, 0), static_cast<ssize_t>(sizeof from));
    EXPECT_EQ(from, prev);
    ::close(got[0]);
    b.barrier();
  });
}

TEST(BootstrapUniqueId, SinglePe) {
  run_pes(1, [](bootstrap& b) {
    char data[3] = {'a', 'b', 'c'}, all[3] = {};
    b.all_gather(data, all, 3);
    EXPECT_EQ(std::string(all, 3), "abc");
    b.barrier();
  });
}

TEST(BootstrapUniqueId, ForeignIdIsRejected) {
  unique_id junk;
  junk.bytes.fill(std::byte{0x5a});
  EXPECT_THROW(make_bootstrap(junk, 0, 1), error);
}

TEST(BootstrapUniqueId, PeOutOfRangeIsRejected) {
  unique_id id = make_unique_id();
  try {
    make_bootstrap(id, 3, 2);
    FAIL() << "accepted pe 3 of 2";
  } catch (const error& e) {
    EXPECT_EQ(e.category(), errc::invalid_argument) << e.what();
  }
}

}  // namespace
}  // namespace shoal
