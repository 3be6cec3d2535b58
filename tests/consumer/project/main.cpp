// The host half of the consumer: the runtime's version and its error type, as a user's program sees them.
#include <cstdio>
#include <string>

#include <shoal/error.hpp>
#include <shoal/version.hpp>

int device_part();  // device_part.cu

int main() {
  std::string version(shoal::version());
  if (version.empty() || version == "unknown") {
    std::fprintf(stderr, "shoal::version() returned '%s'\n", version.c_str());
    return 1;
  }
  shoal::error e(shoal::errc::invalid_argument, "consumer", "a test value");
  if (e.category() != shoal::errc::invalid_argument ||
      std::string(e.what()).find("a test value") == std::string::npos) {
    std::fprintf(stderr, "shoal::error lost its contents: %s\n", e.what());
    return 1;
  }
  std::printf("consumer: linked shoal %s; shoal::error says: %s\n", version.c_str(), e.what());
  return device_part();
}
