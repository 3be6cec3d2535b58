// shoal::init and shoal::world without a GPU: host-only worlds (kNoDevice) whose PEs are threads of this
// process, each with its own bootstrap from one unique id (make_unique_id + make_bootstrap).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"
#include "shoal/world.hpp"

namespace shoal {
namespace {

// How one PE's shoal::init ended: "" when it returned a world, else the category and text of its error.
struct init_end {
  errc category = errc::internal;
  std::string what;
};

// Runs shoal::init on `devices.size()` threads, PE p with devices[p], and finalizes each world made.
std::vector<init_end> init_pes(const std::vector<int>& devices) {
  const int n = static_cast<int>(devices.size());
  const unique_id id = make_unique_id();
  std::vector<init_end> ends(devices.size());
  std::vector<std::thread> threads;
  for (int pe = 0; pe < n; ++pe)
    threads.emplace_back([&, pe] {
      init_end& end = ends[static_cast<std::size_t>(pe)];
      try {
        world w = init({.bootstrap = make_bootstrap(id, pe, n), .device = devices[static_cast<std::size_t>(pe)]});
      } catch (const error& e) {
        end = {e.category(), e.what()};
      } catch (const std::exception& e) {
        end.what = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return ends;
}

// Some PEs pass kNoDevice and others do not: every PE fails in init, naming the PEs that differ from PE 0,
// before any PE asks for a GPU (so this runs where there is none). Those with a device used to go on to the
// heap's collective calls, which the others never made: the job failed later with a bootstrap error that
// did not say why, or hung until the bootstrap's timeout.
TEST(WorldInit, PesThatDisagreeAboutKNoDeviceAllFailNamingThem) {
  {
    const std::vector<init_end> ends = init_pes({kNoDevice, kAutoDevice, kNoDevice});
    for (int pe = 0; pe < 3; ++pe) {
      const init_end& end = ends[static_cast<std::size_t>(pe)];
      EXPECT_EQ(end.category, errc::invalid_argument) << "PE " << pe << ": " << end.what;
      EXPECT_NE(end.what.find("PE 1 passed a device and PE 0 kNoDevice"), std::string::npos)
          << "PE " << pe << ": " << end.what;
    }
  }
  {
    const std::vector<init_end> ends = init_pes({kAutoDevice, kNoDevice, kNoDevice, 0});
    for (int pe = 0; pe < 4; ++pe) {
      const init_end& end = ends[static_cast<std::size_t>(pe)];
      EXPECT_EQ(end.category, errc::invalid_argument) << "PE " << pe << ": " << end.what;
      EXPECT_NE(end.what.find("PEs 1, 2 passed kNoDevice and PE 0 a device"), std::string::npos)
          << "PE " << pe << ": " << end.what;
    }
  }
}

// Every PE host-only: init succeeds without a GPU.
TEST(WorldInit, EveryPeHostOnly) {
  for (const init_end& end : init_pes({kNoDevice, kNoDevice})) EXPECT_EQ(end.what, "");
}

// A world that was moved from has no PE: its accessors say so and its calls throw naming themselves. They
// used to dereference the null runtime and crash.
TEST(WorldMovedFrom, AccessorsSayNoPeAndCallsThrowNamingThemselves) {
  world from = init({.bootstrap = make_bootstrap(make_unique_id(), 0, 1), .device = kNoDevice});
  world to = std::move(from);
  EXPECT_EQ(to.pe(), 0);
  EXPECT_EQ(to.n_pes(), 1);
  EXPECT_EQ(from.pe(), -1);
  EXPECT_EQ(from.n_pes(), 0);
  EXPECT_EQ(from.device(), kNoDevice);
  EXPECT_EQ(from.work_queues(), 0);
  auto expect_refused = [](const char* call, auto&& body) {
    try {
      body();
      ADD_FAILURE() << call << " did not throw";
    } catch (const error& e) {
      EXPECT_EQ(e.category(), errc::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(call), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("moved from"), std::string::npos) << e.what();
    }
  };
  int word = 0;
  expect_refused("shoal::world::bootstrap", [&] { from.bootstrap(); });
  expect_refused("shoal::world::malloc", [&] { from.malloc(64); });
  expect_refused("shoal::world::calloc", [&] { from.calloc(4, 16); });
  expect_refused("shoal::world::align", [&] { from.align(512, 64); });
  expect_refused("shoal::world::malloc_array", [&] { from.malloc_array<double>(8); });
  expect_refused("shoal::world::free", [&] { from.free(nullptr); });
  expect_refused("shoal::world::register_buffer", [&] { from.register_buffer(&word, sizeof word); });
  expect_refused("shoal::world::unregister_buffer", [&] { from.unregister_buffer(&word); });
  expect_refused("shoal::world::ptr", [&] { from.ptr(&word, 0); });
  expect_refused("shoal::world::heap_usage", [&] { from.heap_usage(); });
  expect_refused("shoal::world::device_handle", [&] { from.device_handle(); });
  expect_refused("shoal::world", [&] { from.internals(); });  // what every function given a world goes through
  // Moved back, it works again; the one now moved from refuses.
  from = std::move(to);
  EXPECT_EQ(from.n_pes(), 1);
  EXPECT_NO_THROW(from.bootstrap().barrier());
  expect_refused("shoal::world::bootstrap", [&] { to.bootstrap(); });
}

}  // namespace
}  // namespace shoal
