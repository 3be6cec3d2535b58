// The bootstrap suite's hook: each binary that links bootstrap_suite.cpp defines how the job's bootstrap
// is made (collective over the job; called once per process, and once more by the test of a second
// bootstrap in one process).
#pragma once

#include <memory>

#include "shoal/bootstrap.hpp"

namespace shoal_mp {

std::unique_ptr<shoal::bootstrap> make_job_bootstrap();
// Destroys the suite's bootstrap (collective): call after RUN_ALL_TESTS, before the job ends.
void release_job_bootstrap();

}  // namespace shoal_mp
