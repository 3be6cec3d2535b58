#include "base/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "base/config.hpp"

namespace shoal::detail {
namespace {

constexpr const char* kLevelNames[] = {"error", "warn", "info", "debug", "trace"};
constexpr const char* kSubsystemNames[] = {"base",  "bootstrap", "heap", "transport",
                                           "proxy", "coll",      "perf", "launcher"};

struct log_filter {
  log_level lowest = log_level::warn;
  unsigned subsystem_mask = ~0u;
};

// Parsed once. A bad SHOAL_LOG_* value must not make logging itself throw: the logger falls back to its
// defaults and the error is raised by shoal::init, which validates the whole table.
const log_filter& filter() {
  static const log_filter parsed = [] {
    log_filter f;
    try {
      const config& c = process_config();
      for (int i = 0; i < 5; ++i)
        if (c.log_level == kLevelNames[i]) f.lowest = static_cast<log_level>(i);
      if (std::find(c.log_subsystems.begin(), c.log_subsystems.end(), "all") == c.log_subsystems.end()) {
        f.subsystem_mask = 0;
        for (int i = 0; i < 8; ++i)
          if (std::find(c.log_subsystems.begin(), c.log_subsystems.end(), kSubsystemNames[i]) != c.log_subsystems.end())
            f.subsystem_mask |= 1u << i;
      }
    } catch (...) {
    }
    return f;
  }();
  return parsed;
}

std::atomic<int> g_pe{-1};

}  // namespace

bool log_enabled(log_level level, log_subsystem subsystem) noexcept {
  const log_filter& f = filter();
  if (level == log_level::error) return true;  // errors are never filtered out
  return level <= f.lowest && (f.subsystem_mask >> static_cast<unsigned>(subsystem) & 1u);
}

void log_write(log_level level, log_subsystem subsystem, std::string_view message) noexcept {
  try {
    int pe = g_pe.load(std::memory_order_relaxed);
    std::string line =
        pe >= 0 ? fmt::format("shoal pe {} {} {}: ", pe, kLevelNames[int(level)], kSubsystemNames[int(subsystem)])
                : fmt::format("shoal {} {}: ", kLevelNames[int(level)], kSubsystemNames[int(subsystem)]);
    line += message;
    line += '\n';
    // One write per line so lines of concurrent threads and processes do not interleave.
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
  } catch (...) {
  }
}

void set_log_pe(int pe) noexcept { g_pe.store(pe, std::memory_order_relaxed); }

}  // namespace shoal::detail
