// Multi-process tests: the same binary runs on every PE under shoalrun (at 1, 2, 4, 8 and 64 PEs): the
// bootstrap suite (bootstrap_suite.cpp) over the launcher's bootstrap, the network and proxy tests.
//
// With SHOAL_MP_SCENARIO set the binary instead plays one part of a fault scenario (see scenarios.cpp),
// driven by the BootstrapFaults tests of this same binary (fault_tests.cpp), which run outside a job.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "bootstrap_suite.hpp"
#include "scenarios.hpp"
#include "shoal/bootstrap.hpp"

std::unique_ptr<shoal::bootstrap> shoal_mp::make_job_bootstrap() { return shoal::make_bootstrap_from_env(); }

int main(int argc, char** argv) {
  if (const char* scenario = std::getenv("SHOAL_MP_SCENARIO")) return shoal_mp::run_scenario(scenario);
  // Under a launcher, every PE but 0 reports briefly: one full report, failures from everyone. Set before
  // parsing the command line, which may override it.
  if (const char* rank = std::getenv("SHOAL_RANK"); rank && std::atoi(rank) != 0) GTEST_FLAG_SET(brief, true);
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  shoal_mp::release_job_bootstrap();
  return rc;
}
