#include "base/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "shoal/error.hpp"

extern char** environ;

namespace shoal::detail {
namespace {

[[noreturn]] void reject(const char* name, std::string_view text, std::string_view expected) {
  throw error(errc::config, name, fmt::format("'{}' is not valid: expected {}", text, expected));
}

std::string upper_name(const char* name) {
  std::string out = name;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::toupper(c); });
  return out;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view word = text.substr(0, comma);
    while (!word.empty() && word.front() == ' ') word.remove_prefix(1);
    while (!word.empty() && word.back() == ' ') word.remove_suffix(1);
    if (!word.empty()) words.emplace_back(word);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return words;
}

// "lo..hi" bounds of a numeric row; both ends inclusive.
template <typename T>
void check_range(const char* name, std::string_view text, T value, std::string_view accepts,
                 T (*parse)(const char*, std::string_view)) {
  size_t dots = accepts.find("..");
  if (dots == std::string_view::npos) return;
  T lo = parse(name, accepts.substr(0, dots));
  T hi = parse(name, accepts.substr(dots + 2));
  if (value < lo || value > hi) reject(name, text, fmt::format("a value in {}", accepts));
}

bool parse_boolean(const char* name, std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  reject(name, text, "one of 1, 0, true, false, yes, no, on, off");
}

std::string parse_choice(const char* name, std::string_view text, std::string_view accepts) {
  for (const std::string& word : split_words(accepts))
    if (word == text) return word;
  reject(name, text, fmt::format("one of {}", accepts));
}

std::vector<std::string> parse_list(const char* name, std::string_view text, std::string_view accepts) {
  std::vector<std::string> allowed = split_words(accepts);
  std::vector<std::string> words = split_words(text);
  if (words.empty()) reject(name, text, fmt::format("a comma-separated list of {}", accepts));
  for (const std::string& word : words)
    if (std::find(allowed.begin(), allowed.end(), word) == allowed.end())
      reject(name, text, fmt::format("a comma-separated list of {}", accepts));
  return words;
}

// Levenshtein distance: the edits (insert, delete, replace one character) that turn `a` into `b`.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const config_var> config_table() noexcept {
  // Variable names are the field names upper-cased behind "SHOAL_"; built once, kept for the process.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
#define SHOAL_CONFIG(field, kind, dflt, accepts, doc) out.push_back(upper_name("SHOAL_" #field));
#include "config_table.def"
#undef SHOAL_CONFIG
    return out;
  }();
  static const std::vector<config_var> table = [] {
    std::vector<config_var> out;
    size_t i = 0;
#define SHOAL_CONFIG(field, kind, dflt, accepts, doc) \
  out.push_back(config_var{names[i++].c_str(), config_kind::kind, dflt, accepts, doc});
#include "config_table.def"
#undef SHOAL_CONFIG
    return out;
  }();
  return table;
}

const char* to_string(config_kind kind) noexcept {
  switch (kind) {
    case config_kind::boolean:
      return "boolean";
    case config_kind::integer:
      return "integer";
    case config_kind::bytes:
      return "bytes";
    case config_kind::seconds:
      return "seconds";
    case config_kind::string:
      return "string";
    case config_kind::choice:
      return "choice";
    case config_kind::list:
      return "list";
  }
  return "?";
}

std::int64_t parse_integer(const char* name, std::string_view text) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) reject(name, text, "an integer");
  return value;
}

std::uint64_t parse_bytes(const char* name, std::string_view text) {
  // A whole number with an optional binary suffix: 4096, 64K, 2M, 1G, 1T (also KiB/MiB/GiB/TiB, any case).
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{}) reject(name, text, "a size such as 4096, 64K, 2M or 1G");
  std::string suffix(end, text.data() + text.size());
  std::transform(suffix.begin(), suffix.end(), suffix.begin(), [](unsigned char c) { return std::toupper(c); });
  // Bytes, or a prefix alone, with B, or with iB: "", "B", "K", "KB", "KIB", ... and nothing else.
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  for (const auto& [prefix, bits] : {std::pair{'K', 10}, {'M', 20}, {'G', 30}, {'T', 40}})
    if (!suffix.empty() && suffix[0] == prefix) {
      const std::string_view rest = std::string_view(suffix).substr(1);
      if (rest.empty() || rest == "B" || rest == "IB") shift = bits;
    }
  if (shift < 0) reject(name, text, "a size such as 4096, 64K, 2M or 1G");
  if (shift > 0 && value > (UINT64_MAX >> shift)) reject(name, text, "a size that fits in 64 bits");
  return value << shift;
}

double parse_seconds(const char* name, std::string_view text) {
  // Seconds as a decimal number, or with a unit: 500ms, 2s, 5m.
  std::string s(text);
  double scale = 1.0;
  if (s.ends_with("ms")) {
    scale = 1e-3;
    s.resize(s.size() - 2);
  } else if (s.ends_with("us")) {
    scale = 1e-6;
    s.resize(s.size() - 2);
  } else if (s.ends_with("s")) {
    s.pop_back();
  } else if (s.ends_with("m")) {
    scale = 60.0;
    s.pop_back();
  }
  // strtod also takes leading spaces, hexadecimal and "inf": only digits, a point and an exponent here.
  if (s.empty() || s.find_first_not_of("0123456789.eE+-") != std::string::npos ||
      !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.'))
    reject(name, text, "a non-negative duration such as 30, 2.5, 500ms or 5m");
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || end != s.c_str() + s.size() || !std::isfinite(value) || value < 0)
    reject(name, text, "a non-negative duration such as 30, 2.5, 500ms or 5m");
  return value * scale;
}

config config::load(const getenv_fn& getenv_fn) {
  auto get = [&](const char* name) -> const char* { return getenv_fn ? getenv_fn(name) : std::getenv(name); };
  config c;
  // Each field is parsed from the environment if set, else from the table's default, with one rule per kind.
#define SHOAL_CONFIG(field, kind, dflt, accepts, doc)                                                          \
  {                                                                                                            \
    const std::string name = upper_name("SHOAL_" #field);                                                      \
    const char* set = get(name.c_str());                                                                       \
    std::string_view text = (set != nullptr && *set != '\0') ? std::string_view(set) : std::string_view(dflt); \
    c.field = parse_field_##kind(name.c_str(), text, accepts);                                                 \
  }
  [[maybe_unused]] auto parse_field_boolean = [](const char* n, std::string_view t, std::string_view) {
    return parse_boolean(n, t);
  };
  auto parse_field_integer = [](const char* n, std::string_view t, std::string_view a) {
    std::int64_t v = parse_integer(n, t);
    check_range<std::int64_t>(n, t, v, a, parse_integer);
    return v;
  };
  auto parse_field_bytes = [](const char* n, std::string_view t, std::string_view a) {
    std::uint64_t v = parse_bytes(n, t);
    check_range<std::uint64_t>(n, t, v, a, parse_bytes);
    return v;
  };
  auto parse_field_seconds = [](const char* n, std::string_view t, std::string_view a) {
    double v = parse_seconds(n, t);
    check_range<double>(n, t, v, a, parse_seconds);
    return v;
  };
  auto parse_field_string = [](const char*, std::string_view t, std::string_view) { return std::string(t); };
  auto parse_field_choice = [](const char* n, std::string_view t, std::string_view a) { return parse_choice(n, t, a); };
  auto parse_field_list = [](const char* n, std::string_view t, std::string_view a) { return parse_list(n, t, a); };
#include "config_table.def"
#undef SHOAL_CONFIG
  return c;
}

std::vector<std::string> unknown_variable_warnings(std::span<const char* const> environment) {
  std::vector<std::string> warnings;
  for (const char* entry : environment) {
    if (entry == nullptr) continue;
    const std::string_view text(entry);
    const std::string_view name = text.substr(0, text.find('='));
    const std::string upper = upper_name(std::string(name).c_str());
    if (!upper.starts_with("SHOAL_")) continue;
    bool known = false;
    const char* closest = nullptr;
    std::size_t closest_distance = 0;
    for (const config_var& var : config_table()) {
      if (name == var.name) {
        known = true;
        break;
      }
      const std::size_t distance = edit_distance(upper, var.name);
      if (closest == nullptr || distance < closest_distance) closest = var.name, closest_distance = distance;
    }
    // Close: a case slip, or a few characters left out, doubled or swapped in a name of this length. A name
    // far from every variable is someone else's (shoal's tools and tests read a few of their own): no word.
    if (known || closest == nullptr || closest_distance > 2 + upper.size() / 10) continue;
    warnings.push_back(fmt::format(
        "{} is set, but shoal has no such variable and ignores it; did you mean {}? (shoal-info --env lists them)",
        name, closest));
  }
  return warnings;
}

std::vector<std::string> unknown_variable_warnings() {
  std::vector<const char*> entries;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) entries.push_back(*entry);
  return unknown_variable_warnings(entries);
}

const config& process_config() {
  static const config loaded = config::load();
  return loaded;
}

}  // namespace shoal::detail
