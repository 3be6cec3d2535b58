#include "scenarios.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../common/open_file_limit.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"

namespace shoal_mp {
namespace {

int env_pe() {
  const char* v = std::getenv("SHOAL_RANK");
  return v ? std::atoi(v) : 0;
}

void all_gather_round(shoal::bootstrap& b, int round) {
  std::vector<int> all(static_cast<std::size_t>(b.n_pes()));
  int mine = b.pe() * 1000 + round;
  b.all_gather(&mine, all.data(), sizeof mine);
  for (int p = 0; p < b.n_pes(); ++p)
    if (all[static_cast<std::size_t>(p)] != p * 1000 + round) {
      std::fprintf(stderr, "wrong all_gather result from PE %d in round %d\n", p, round);
      std::exit(1);
    }
}

}  // namespace

int run_scenario(const char* spec) {
  std::string name = spec;
  int target = -1;
  if (auto colon = name.find(':'); colon != std::string::npos) {
    target = std::atoi(name.c_str() + colon + 1);
    name.resize(colon);
  }
  const int pe = env_pe();
  try {
    // Room for the bootstrap's own descriptors (SHOAL_MP_FILE_ROOM of them), not for every PE's connection.
    std::optional<shoal_test::open_file_limit> few_files;
    if (name == "few_files" && pe == target) {
      few_files.emplace(std::atoi(std::getenv("SHOAL_MP_FILE_ROOM")));
      if (!few_files->ok()) return 2;
    }
    if ((name == "never_reach" || name == "late_hub") && pe == target) {
      std::this_thread::sleep_for(std::chrono::seconds(60));  // the driver kills it long before
      return 0;
    }
    if (name == "late_hub" && pe == 0)  // the others wait from their own start, 0.75 timeouts before the hub's
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    std::unique_ptr<shoal::bootstrap> b = shoal::make_bootstrap_from_env();
    if (name == "init_only" || name == "never_reach" || name == "few_files" || name == "late_hub") {
      b->barrier();
      return 0;
    }
    if (name == "exit" || name == "kill") {
      for (int round = 1; round <= 4; ++round) all_gather_round(*b, round);
      if (pe == target) {
        // Let the others enter the fifth all_gather first, so the hub sees the death during it.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        if (name == "kill") std::raise(SIGKILL);
        ::_exit(kDiedOnPurpose);
      }
      all_gather_round(*b, 5);
      return 0;  // not expected: the fifth all_gather cannot complete
    }
    if (name == "mismatch") {
      int value = pe;
      std::vector<int> all(static_cast<std::size_t>(b->n_pes()));
      if (pe == target) {
        b->broadcast(&value, sizeof value, 0);
      } else {
        b->all_gather(&value, all.data(), sizeof value);
      }
      return 0;
    }
    if (name == "busy") {
      for (int round = 0; round < 200; ++round) all_gather_round(*b, round);
      b->barrier();
      return 0;
    }
    std::fprintf(stderr, "unknown scenario '%s'\n", spec);
    return 2;
  } catch (const shoal::error& e) {
    std::fprintf(stderr, "caught: %s\n", e.what());
    return kCaughtError;
  }
}

}  // namespace shoal_mp
