// Argument checks of the on-stream collectives that need no team: the operator, and the sizes of the buffers
// a team's members fill (coll/stream_common.hpp). Each error names the call and the value at fault.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "coll/stream_common.hpp"
#include "shoal/coll_stream.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

// The message of the shoal::error that `f` throws, after checking its category and call ("" if none).
template <typename F>
std::string error_of(F f, errc category) {
  try {
    f();
  } catch (const error& e) {
    EXPECT_EQ(e.category(), category) << e.what();
    EXPECT_EQ(e.context(), "shoal::reduce_on_stream") << e.what();
    return e.what();
  }
  return "";
}

TEST(CollArguments, ReduceOpOutsideTheEnumerationIsRefused) {
  for (int op = 0; op < kReduceOpCount; ++op)
    EXPECT_NO_THROW(check_reduce_op(static_cast<reduce_op>(op), "shoal::reduce_on_stream")) << op;
  for (int op : {kReduceOpCount, kReduceOpCount + 1, 255, -1}) {
    const std::string what = error_of([&] { check_reduce_op(static_cast<reduce_op>(op), "shoal::reduce_on_stream"); },
                                      errc::invalid_argument);
    EXPECT_NE(what.find("operator " + std::to_string(op) + " is not a shoal::reduce_op"), std::string::npos)
        << "op " << op << ": " << what;
  }
}

TEST(CollArguments, TeamBytesNameTheMembersAndTheBlock) {
  EXPECT_EQ(team_bytes(4096, 8, "shoal::reduce_on_stream"), 32768u);
  EXPECT_EQ(team_bytes(0, 8, "shoal::reduce_on_stream"), 0u);
  EXPECT_EQ(team_bytes(SIZE_MAX / 2, 2, "shoal::reduce_on_stream"), SIZE_MAX - 1);
  const std::size_t block = (SIZE_MAX / 3) + 1;
  const std::string what = error_of([&] { team_bytes(block, 3, "shoal::reduce_on_stream"); }, errc::invalid_argument);
  EXPECT_NE(what.find("3 members x " + std::to_string(block) + " bytes each overflows"), std::string::npos) << what;
}

TEST(CollArguments, ElementBytesNameTheCountAndTheSize) {
  const std::string what =
      error_of([] { collective_bytes(SIZE_MAX / 4 + 1, 4, "shoal::reduce_on_stream"); }, errc::invalid_argument);
  EXPECT_NE(what.find("a count of " + std::to_string(SIZE_MAX / 4 + 1) + " x 4 bytes"), std::string::npos) << what;
}

}  // namespace
}  // namespace shoal::detail
