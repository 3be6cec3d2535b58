#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "host/work_queues.hpp"

namespace shoal::detail {
namespace {

TEST(WorkQueues, UnsetIsCudasDefaultWhichIsSmallerUnderMps) {
  EXPECT_EQ(work_queues_from(nullptr, false).count, kDefaultWorkQueues);
  EXPECT_EQ(work_queues_from("", false).count, kDefaultWorkQueues);
  const work_queue_count mps = work_queues_from(nullptr, true);
  EXPECT_EQ(mps.count, kDefaultWorkQueuesUnderMps);
  EXPECT_NE(mps.source.find("MPS"), std::string::npos) << mps.source;
  EXPECT_LT(kDefaultWorkQueuesUnderMps, kHierarchicalWorkQueues) << "the case the check exists for";
}

TEST(WorkQueues, TheVariableWinsWithinCudasRange) {
  for (const char* v : {"1", "3", "32"}) {
    const work_queue_count q = work_queues_from(v, true);
    EXPECT_EQ(q.count, std::atoi(v));
    EXPECT_EQ(q.source, std::string("CUDA_DEVICE_MAX_CONNECTIONS=") + v);
  }
}

TEST(WorkQueues, ValuesCudaDoesNotTakeFallBackAndSaySo) {
  for (const char* v : {"0", "33", "-4", "8x", "eight", " 8"}) {
    const work_queue_count q = work_queues_from(v, false);
    EXPECT_EQ(q.count, kDefaultWorkQueues) << v;
    EXPECT_NE(q.source.find(v), std::string::npos) << "the message names the value: " << q.source;
  }
}

}  // namespace
}  // namespace shoal::detail
