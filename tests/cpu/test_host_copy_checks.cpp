// The host RMA's checks of a copy's buffers (host/world_impl.hpp): a null local buffer with bytes to move, a
// pageable one in a stream form, and a put or get to this PE whose source and destination ranges partly
// overlap, throw naming the call. (A device buffer shorter than the copy needs a GPU: Heap.* in the GPU tier.)
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <string>

#include "host/world_impl.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

TEST(HostCopyChecks, NullLocalBufferWithBytesIsRefused) {
  std::array<std::byte, 16> local{};
  EXPECT_NO_THROW(check_local_buffer(local.data(), 16, "shoal::put"));
  EXPECT_NO_THROW(check_local_buffer(nullptr, 0, "shoal::put"));
  try {
    check_local_buffer(nullptr, 16, "shoal::get");
    ADD_FAILURE() << "a null buffer of 16 bytes was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.category(), errc::invalid_argument);
    EXPECT_EQ(e.context(), "shoal::get");
    EXPECT_NE(std::string(e.what()).find("the local buffer is null (16 bytes"), std::string::npos) << e.what();
  }
}

// Plain host memory is pageable to CUDA (and on a machine without a GPU every pointer reads so): fine for the
// blocking forms, refused by the stream forms, whose copies must not wait for the host.
TEST(HostCopyChecks, PageableLocalBufferIsRefusedOnAStreamOnly) {
  std::array<std::byte, 64> local{};
  EXPECT_NO_THROW(check_local_buffer(local.data(), local.size(), "shoal::put"));
  EXPECT_NO_THROW(check_local_buffer(local.data(), 0, "shoal::put_on_stream", local_buffer_use::stream_ordered));
  try {
    check_local_buffer(local.data(), local.size(), "shoal::get_on_stream", local_buffer_use::stream_ordered);
    ADD_FAILURE() << "a pageable buffer was accepted for a stream form";
  } catch (const error& e) {
    EXPECT_EQ(e.category(), errc::invalid_argument);
    EXPECT_EQ(e.context(), "shoal::get_on_stream");
    EXPECT_NE(std::string(e.what()).find("pageable host memory"), std::string::npos) << e.what();
  }
}

TEST(HostCopyChecks, OverlapIsRefusedAndOneRangeOntoItselfIsNoCopy) {
  std::array<std::byte, 256> buffer{};
  std::byte* b = buffer.data();
  EXPECT_FALSE(copy_needed(b, b, 64, "shoal::put"));       // an object onto itself: nothing to do
  EXPECT_FALSE(copy_needed(b, b + 8, 0, "shoal::put"));    // no bytes
  EXPECT_TRUE(copy_needed(b, b + 64, 64, "shoal::put"));   // adjacent, disjoint
  EXPECT_TRUE(copy_needed(b + 64, b, 64, "shoal::put"));   // the other way round
  EXPECT_TRUE(copy_needed(b, b + 128, 64, "shoal::put"));  // apart
  for (std::ptrdiff_t shift : {1, 8, 63, -1, -63}) {
    try {
      copy_needed(b + 64 + shift, b + 64, 64, "shoal::put_on_stream");
      ADD_FAILURE() << "ranges " << shift << " bytes apart were accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.category(), errc::invalid_argument);
      EXPECT_EQ(e.context(), "shoal::put_on_stream");
      EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace shoal::detail
