// One logger for the whole library. Levels and subsystems are chosen by SHOAL_LOG_LEVEL and
// SHOAL_LOG_SUBSYSTEMS; every line goes to stderr in one write, prefixed with the PE once it is known.
#pragma once

#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace shoal::detail {

enum class log_level { error, warn, info, debug, trace };
enum class log_subsystem { base, bootstrap, heap, transport, proxy, coll, perf, launcher };

bool log_enabled(log_level level, log_subsystem subsystem) noexcept;
void log_write(log_level level, log_subsystem subsystem, std::string_view message) noexcept;

// Lines printed after this carry "pe N"; -1 (the start) prints no PE.
void set_log_pe(int pe) noexcept;

template <typename... Args>
void log(log_level level, log_subsystem subsystem, fmt::format_string<Args...> format, Args&&... args) {
  if (log_enabled(level, subsystem)) log_write(level, subsystem, fmt::format(format, std::forward<Args>(args)...));
}

#define SHOAL_LOG_ERROR(subsys, ...) \
  ::shoal::detail::log(::shoal::detail::log_level::error, ::shoal::detail::log_subsystem::subsys, __VA_ARGS__)
#define SHOAL_LOG_WARN(subsys, ...) \
  ::shoal::detail::log(::shoal::detail::log_level::warn, ::shoal::detail::log_subsystem::subsys, __VA_ARGS__)
#define SHOAL_LOG_INFO(subsys, ...) \
  ::shoal::detail::log(::shoal::detail::log_level::info, ::shoal::detail::log_subsystem::subsys, __VA_ARGS__)
#define SHOAL_LOG_DEBUG(subsys, ...) \
  ::shoal::detail::log(::shoal::detail::log_level::debug, ::shoal::detail::log_subsystem::subsys, __VA_ARGS__)
#define SHOAL_LOG_TRACE(subsys, ...) \
  ::shoal::detail::log(::shoal::detail::log_level::trace, ::shoal::detail::log_subsystem::subsys, __VA_ARGS__)

}  // namespace shoal::detail
