// The bootstrap message codec: round trips, and rejection of truncated, over-long and foreign input
// (what the hub sees from a connection that is not a PE of the job).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "bootstrap/wire.hpp"

namespace shoal::detail::wire {
namespace {

std::vector<std::byte> bytes_of(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

TEST(BootstrapWire, HeaderRoundTrip) {
  header h{msg_type::coll, 0x0102030405060708ull, 1ull << 33};
  header_bytes b = encode_header(h);
  auto back = decode_header(b);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->type, h.type);
  EXPECT_EQ(back->seq, h.seq);
  EXPECT_EQ(back->size, h.size);
}

TEST(BootstrapWire, HeaderRejectsForeignBytes) {
  header_bytes b = encode_header({msg_type::hello, 0, 10});
  std::string why;
  header_bytes bad_magic = b;
  bad_magic[0] ^= std::byte{1};
  EXPECT_FALSE(decode_header(bad_magic, &why));
  EXPECT_NE(why.find("magic"), std::string::npos) << why;

  header_bytes bad_version = b;
  bad_version[4] = std::byte{99};
  EXPECT_FALSE(decode_header(bad_version, &why));
  EXPECT_NE(why.find("version"), std::string::npos) << why;

  header_bytes bad_type = b;
  bad_type[6] = std::byte{77};
  EXPECT_FALSE(decode_header(bad_type, &why));
  EXPECT_NE(why.find("type"), std::string::npos) << why;

  header_bytes http{};  // what a stray HTTP client would send
  std::string get = "GET / HTTP/1.1\r\nHost: x\r\n";
  std::memcpy(http.data(), get.data(), http.size());
  EXPECT_FALSE(decode_header(http));
}

hello sample_hello() {
  return {.secret = "0123456789abcdef0123456789abcdef",
          .pe = 7,
          .n_pes = 64,
          .pid = 123456,
          .host = "node-a.cluster",
          .fd_socket = "shoal-1234-7-99-0"};
}

TEST(BootstrapWire, HelloRoundTrip) {
  hello h = sample_hello();
  auto back = decode_hello(encode_hello(h));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->secret, h.secret);
  EXPECT_EQ(back->pe, h.pe);
  EXPECT_EQ(back->n_pes, h.n_pes);
  EXPECT_EQ(back->pid, h.pid);
  EXPECT_EQ(back->host, h.host);
  EXPECT_EQ(back->fd_socket, h.fd_socket);
}

TEST(BootstrapWire, HelloRejectsEveryTruncationAndTrailingBytes) {
  std::vector<std::byte> full = encode_hello(sample_hello());
  for (std::size_t n = 0; n < full.size(); ++n) {
    std::string why;
    EXPECT_FALSE(decode_hello(std::span(full).first(n), &why)) << "accepted " << n << " of " << full.size();
    EXPECT_FALSE(why.empty());
  }
  full.push_back(std::byte{0});
  std::string why;
  EXPECT_FALSE(decode_hello(full, &why));
  EXPECT_NE(why.find("trailing"), std::string::npos) << why;
}

TEST(BootstrapWire, HelloRejectsOverlongField) {
  std::vector<std::byte> b = {std::byte{0xff}, std::byte{0xff}};  // a 65535-byte secret
  b.resize(70000, std::byte{'a'});
  std::string why;
  EXPECT_FALSE(decode_hello(b, &why));
  EXPECT_NE(why.find("string field"), std::string::npos) << why;
}

TEST(BootstrapWire, RandomGarbageNeverDecodes) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> b(rng() % 64);
    for (auto& x : b) x = static_cast<std::byte>(rng());
    // A random buffer may happen to parse as a hello; it must then hold fields within bounds and use
    // exactly the bytes given, which re-encoding checks.
    if (auto h = decode_hello(b)) {
      EXPECT_EQ(encode_hello(*h), b);
    }
    if (auto t = decode_table(b)) {
      EXPECT_EQ(encode_table(*t), b);
    }
  }
  EXPECT_FALSE(decode_hello(bytes_of("GET / HTTP/1.1\r\n\r\n")));
}

// Valid encodings with a few bytes changed, cut short or extended: each either fails to decode or decodes to
// fields that re-encode to exactly those bytes. Both outcomes must occur, so the check above is not vacuous.
TEST(BootstrapWire, MutatedEncodingsDecodeCanonicallyOrNotAtAll) {
  std::mt19937_64 rng(43);
  const hello h{.secret = "0123456789abcdef0123456789abcdef",
                .pe = 3,
                .n_pes = 8,
                .pid = 4242,
                .host = "node-7",
                .fd_socket = "shoal-fd-3"};
  std::vector<peer_info> peers;
  for (int pe = 0; pe < 5; ++pe) peers.push_back({"host" + std::to_string(pe), 2000 + pe, "sock" + std::to_string(pe)});
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 4000; ++i) {
    const bool table = i % 2 == 1;
    std::vector<std::byte> b = table ? encode_table(peers) : encode_hello(h);
    switch (rng() % 3) {
      case 0:  // change one to three bytes
        for (int k = 1 + int(rng() % 3); k > 0; --k) b[rng() % b.size()] = static_cast<std::byte>(rng());
        break;
      case 1:
        b.resize(rng() % b.size());
        break;
      default:
        b.push_back(static_cast<std::byte>(rng()));
        break;
    }
    if (table) {
      if (auto t = decode_table(b)) {
        EXPECT_EQ(encode_table(*t), b);
        ++accepted;
      } else {
        ++rejected;
      }
    } else if (auto d = decode_hello(b)) {
      EXPECT_EQ(encode_hello(*d), b);
      ++accepted;
    } else {
      ++rejected;
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

TEST(BootstrapWire, TableRoundTripAndCorruptCount) {
  std::vector<peer_info> peers;
  for (int pe = 0; pe < 300; ++pe)
    peers.push_back({"host" + std::to_string(pe % 3), 1000 + pe, "sock" + std::to_string(pe)});
  std::vector<std::byte> b = encode_table(peers);
  auto back = decode_table(b);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, peers);

  std::vector<std::byte> lying = b;
  lying[3] = std::byte{0x7f};  // claims ~2 billion entries
  std::string why;
  EXPECT_FALSE(decode_table(lying, &why));
  EXPECT_FALSE(decode_table(std::span(b).first(b.size() - 1)));
  EXPECT_TRUE(decode_table(encode_table({})));
}

TEST(BootstrapWire, FailureRoundTrip) {
  failure f{errc::peer_failure, "PE 2 died (connection closed) during all_gather #5"};
  auto back = decode_failure(encode_failure(f));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->category, f.category);
  EXPECT_EQ(back->message, f.message);
  std::vector<std::byte> bad = encode_failure(f);
  bad[0] = std::byte{200};  // no such category
  EXPECT_FALSE(decode_failure(bad));
}

TEST(BootstrapWire, CollHeaderRoundTripAndSizes) {
  coll_header h{coll_kind::broadcast, 3, 4096};
  auto b = encode_coll_header(h);
  auto back = decode_coll_header(b);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, h);
  EXPECT_EQ(coll_data_bytes(h, 3, 8), 4096u);
  EXPECT_EQ(coll_data_bytes(h, 2, 8), 0u);
  EXPECT_EQ(coll_data_bytes({coll_kind::alltoall, 0, 10}, 1, 8), 80u);
  EXPECT_EQ(coll_data_bytes({coll_kind::barrier, 0, 0}, 1, 8), 0u);
  EXPECT_FALSE(coll_data_bytes({coll_kind::alltoall, 0, ~0ull / 2}, 1, 8));
  b[0] = std::byte{9};
  EXPECT_FALSE(decode_coll_header(b));
  EXPECT_FALSE(decode_coll_header(std::span(b).first(5)));
  EXPECT_EQ(describe({coll_kind::broadcast, 1, 8}), "broadcast of 8 bytes from PE 1");
}

}  // namespace
}  // namespace shoal::detail::wire
