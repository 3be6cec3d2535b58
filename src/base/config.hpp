// The parsed, validated SHOAL_* configuration of one process (see config_table.def for the variables).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace shoal::detail {

enum class config_kind { boolean, integer, bytes, seconds, string, choice, list };

// One row of the table, for help text and validation.
struct config_var {
  const char* name;  // e.g. "SHOAL_LOG_LEVEL"
  config_kind kind;
  const char* default_value;
  const char* accepts;
  const char* description;
};

std::span<const config_var> config_table() noexcept;
const char* to_string(config_kind kind) noexcept;

struct config {
#define SHOAL_CONFIG_FIELD_boolean bool
#define SHOAL_CONFIG_FIELD_integer std::int64_t
#define SHOAL_CONFIG_FIELD_bytes std::uint64_t
#define SHOAL_CONFIG_FIELD_seconds double
#define SHOAL_CONFIG_FIELD_string std::string
#define SHOAL_CONFIG_FIELD_choice std::string
#define SHOAL_CONFIG_FIELD_list std::vector<std::string>
#define SHOAL_CONFIG(field, kind, dflt, accepts, doc) SHOAL_CONFIG_FIELD_##kind field;
#include "config_table.def"
#undef SHOAL_CONFIG

  // Reads every variable through `getenv_fn` (default: the process environment). Throws shoal::error
  // (errc::config) naming the first variable with a bad value and what it accepts.
  using getenv_fn = std::function<const char*(const char*)>;
  static config load(const getenv_fn& getenv_fn = {});
};

// The process environment's configuration, parsed once on first use. Throws like config::load.
const config& process_config();

// One warning for each variable of `environment` ("NAME=value" entries, as environ holds them) whose name
// starts with SHOAL_ (in any case), is not in the table and is a few edits from a name that is, naming that
// one. Nothing reads such a variable, so without a word a misspelt SHOAL_HEAP_SIZE would leave the default
// in force. Names far from every table name pass in silence: shoal's own tools and tests read a few
// (SHOAL_COMMIT, SHOAL_TEST_*), and so may a user's program. shoal::init logs these for the process
// environment (the overload below).
std::vector<std::string> unknown_variable_warnings(std::span<const char* const> environment);
std::vector<std::string> unknown_variable_warnings();

// Parsers shared with the launcher and tests. Each throws shoal::error(errc::config) naming `name`.
std::uint64_t parse_bytes(const char* name, std::string_view text);
double parse_seconds(const char* name, std::string_view text);
std::int64_t parse_integer(const char* name, std::string_view text);

}  // namespace shoal::detail
