// The MPI tier: the bootstrap suite (bootstrap_suite.cpp) over shoal::make_mpi_bootstrap(MPI_COMM_WORLD),
// then what only an MPI bootstrap has: PEs that are the communicator's ranks, bootstraps of
// sub-communicators side by side, a world made from a communicator, and the program's own messages
// untouched by shoal's. Every process runs the same tests in the same order (ctest mp.mpi.*, under
// mpirun at several process counts).
#include <gtest/gtest.h>
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap_suite.hpp"
#include "shoal/bootstrap_mpi.hpp"
#include "shoal/error.hpp"
#include "shoal/host_rma.hpp"
#include "shoal/world.hpp"

std::unique_ptr<shoal::bootstrap> shoal_mp::make_job_bootstrap() { return shoal::make_mpi_bootstrap(MPI_COMM_WORLD); }

namespace {

int world_rank() {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

TEST(MpiBootstrap, PesAreTheCommunicatorsRanks) {
  std::unique_ptr<shoal::bootstrap> boot = shoal::make_mpi_bootstrap(MPI_COMM_WORLD);
  EXPECT_EQ(boot->pe(), world_rank());
  EXPECT_EQ(boot->n_pes(), world_size());
}

// Ranks split by parity: two jobs side by side, each one's collectives inside its own communicator.
TEST(MpiBootstrap, SubCommunicatorsMakeSeparateJobs) {
  const int rank = world_rank(), size = world_size(), half = rank % 2;
  MPI_Comm comm = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, half, rank, &comm), MPI_SUCCESS);
  {
    std::unique_ptr<shoal::bootstrap> boot = shoal::make_mpi_bootstrap(comm);
    EXPECT_EQ(boot->pe(), rank / 2);
    EXPECT_EQ(boot->n_pes(), (size - half + 1) / 2);
    std::vector<int> all(static_cast<std::size_t>(boot->n_pes()), -1);
    boot->all_gather(&rank, all.data(), sizeof rank);
    for (int p = 0; p < boot->n_pes(); ++p) EXPECT_EQ(all[static_cast<std::size_t>(p)], 2 * p + half) << "PE " << p;
    boot->barrier();
  }
  MPI_Comm_free(&comm);
}

// The last rank's node id is too long for the host field. Every rank must fail: that rank used to throw
// before the gather, leaving the others in MPI_Allgather for good.
TEST(MpiBootstrap, OverlongHostNameOnOneRankFailsEveryRank) {
  const bool mine = world_rank() == world_size() - 1;
  if (mine) {
    ASSERT_EQ(::setenv("SHOAL_NODE_ID", std::string(300, 'n').c_str(), 1), 0);
  }
  try {
    shoal::make_mpi_bootstrap(MPI_COMM_WORLD);
    ADD_FAILURE() << "the bootstrap was made";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.category(), shoal::errc::bootstrap) << e.what();
    EXPECT_NE(std::string(e.what()).find(mine ? "longer than" : "too long"), std::string::npos) << e.what();
  }
  if (mine) ::unsetenv("SHOAL_NODE_ID");
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(MpiBootstrap, WorldFromTheCommunicator) {
  shoal::world w = shoal::init({.bootstrap = shoal::make_mpi_bootstrap(MPI_COMM_WORLD), .device = shoal::kNoDevice});
  EXPECT_EQ(w.pe(), world_rank());
  EXPECT_EQ(w.n_pes(), world_size());
  shoal::barrier_all(w);
}

// shoal works on a duplicate of the communicator: a message the program leaves in flight on it is
// neither taken nor disturbed by shoal's collectives meanwhile.
TEST(MpiBootstrap, ProgramMessagesAreUntouched) {
  const int rank = world_rank(), size = world_size();
  std::unique_ptr<shoal::bootstrap> boot = shoal::make_mpi_bootstrap(MPI_COMM_WORLD);
  const int to = (rank + 1) % size, from = (rank + size - 1) % size;
  int sent = 1000 + rank, got = -1;
  MPI_Request requests[2];
  ASSERT_EQ(MPI_Irecv(&got, 1, MPI_INT, from, 7, MPI_COMM_WORLD, &requests[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Isend(&sent, 1, MPI_INT, to, 7, MPI_COMM_WORLD, &requests[1]), MPI_SUCCESS);
  std::vector<int> all(static_cast<std::size_t>(size), -1);
  boot->all_gather(&sent, all.data(), sizeof sent);
  boot->barrier();
  ASSERT_EQ(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(got, 1000 + from);
  for (int p = 0; p < size; ++p) EXPECT_EQ(all[static_cast<std::size_t>(p)], 1000 + p);
}

// Refused before any message moves (every PE refuses alike, so the job goes on).
TEST(MpiBootstrap, CountsMpiCannotHoldAreRefused) {
  std::unique_ptr<shoal::bootstrap> boot = shoal::make_mpi_bootstrap(MPI_COMM_WORLD);
  try {
    boot->all_gather(nullptr, nullptr, std::size_t{INT_MAX} + 1);
    ADD_FAILURE() << "an all_gather of more than INT_MAX bytes per PE was accepted";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.category(), shoal::errc::invalid_argument) << e.what();
  }
  boot->barrier();
}

}  // namespace

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
  if (world_rank() != 0) GTEST_FLAG_SET(brief, true);  // one full report, failures from everyone
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  shoal_mp::release_job_bootstrap();
  // Any failing process fails the job.
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
