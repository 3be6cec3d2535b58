#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "base/run_while_polling.hpp"

namespace shoal::detail {
namespace {

// The work can finish only after the caller has polled a few times: a collective whose peer needs this
// PE's progress first. The caller must keep polling while the work waits, and return once it is done.
TEST(RunWhilePolling, PollsUntilTheWorkThatNeedsThePollsIsDone) {
  std::atomic<int> polls{0};
  std::atomic<bool> worked{false};
  run_while_polling(
      [&] {
        while (polls.load() < 100) {
        }
        worked = true;
      },
      [&] { return polls.fetch_add(1) % 2 == 0; });  // every other poll "made progress", the rest yield
  EXPECT_TRUE(worked.load());
  EXPECT_GE(polls.load(), 100);
}

TEST(RunWhilePolling, RethrowsWhatTheWorkThrewAfterItEnded) {
  std::atomic<int> polls{0};
  try {
    run_while_polling([] { throw std::runtime_error("peer gone"); }, [&] { return ++polls > 0; });
    FAIL() << "the work's exception was swallowed";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "peer gone");
  }
}

}  // namespace
}  // namespace shoal::detail
