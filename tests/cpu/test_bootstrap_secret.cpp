// The job secret travels in the hello, a string field of at most wire::kMaxStringBytes. A longer secret
// would arrive cut and match no PE's, so the TCP bootstrap refuses it before it connects anywhere.
#include <gtest/gtest.h>

#include <string>

#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/wire.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

// A job of one PE, which still greets its own hub with the secret.
tcp_bootstrap_options one_pe_with_secret(std::size_t secret_bytes) {
  return {.pe = 0, .n_pes = 1, .addr = "127.0.0.1:0", .secret = std::string(secret_bytes, 's'), .timeout_s = 5};
}

TEST(BootstrapSecret, LongerThanTheWireCarriesIsAConfigError) {
  try {
    tcp_bootstrap b(one_pe_with_secret(wire::kMaxStringBytes + 1));
    FAIL() << "a secret of " << wire::kMaxStringBytes + 1 << " bytes was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.category(), errc::config) << e.what();
    EXPECT_NE(std::string(e.what()).find("SHOAL_BOOTSTRAP_SECRET"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(wire::kMaxStringBytes)), std::string::npos) << e.what();
  }
}

TEST(BootstrapSecret, AsLongAsTheWireCarriesIsAccepted) {
  tcp_bootstrap b(one_pe_with_secret(wire::kMaxStringBytes));
  EXPECT_EQ(b.n_pes(), 1);
}

}  // namespace
}  // namespace shoal::detail
