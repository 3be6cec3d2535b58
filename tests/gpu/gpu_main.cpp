// main() of the GPU tier: creates the world before any test and finalizes it after all of them.
#include <cstdio>
#include <memory>

#include "gpu_env.hpp"

namespace shoal::gpu_test {
namespace {
std::unique_ptr<shoal::world> g_world;
std::string g_skip_reason;
}  // namespace

shoal::world* the_world() { return g_world.get(); }
const std::string& skip_reason() { return g_skip_reason; }

}  // namespace shoal::gpu_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    shoal::gpu_test::g_skip_reason = "no GPU on this machine";
  } else {
    try {
      shoal::gpu_test::g_world = std::make_unique<shoal::world>(shoal::init());
    } catch (const shoal::error& e) {
      if (e.category() != shoal::errc::unsupported) throw;
      shoal::gpu_test::g_skip_reason = e.what();
    }
  }
  int status = RUN_ALL_TESTS();
  shoal::gpu_test::g_world.reset();
  return status;
}
