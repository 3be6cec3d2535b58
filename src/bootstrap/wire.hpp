// The bootstrap's message format: pure encoding and decoding, no I/O, so it is unit-tested on its own.
//
// Every message is a 24-byte header followed by `size` payload bytes. All integers are little-endian.
//   header:  u32 magic | u16 version | u16 type | u64 seq | u64 size
// The hub trusts nothing from a connection before its hello checked out (right magic, version, secret,
// well-formed fields): decoders reject truncated input, trailing bytes and over-long fields.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "shoal/error.hpp"

namespace shoal::detail::wire {

inline constexpr std::uint32_t kMagic = 0x4c414f53;  // "SOAL" on the wire (little-endian)
inline constexpr std::uint16_t kVersion = 2;  // 2: the hub welcomes each hello
inline constexpr std::size_t kHeaderBytes = 24;
// A hello is a few short strings; anything longer is not one.
inline constexpr std::uint64_t kMaxHelloBytes = 4096;
// Longest string field (host identity, socket name, secret, failure text).
inline constexpr std::size_t kMaxStringBytes = 1024;
// Largest payload accepted from an authenticated PE (a sanity bound against corrupt length fields).
inline constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 38;

enum class msg_type : std::uint16_t {
  hello = 1,    // PE -> hub: who I am (payload: hello)
  table = 2,    // hub -> PE: everyone, once all arrived (payload: table)
  failure = 3,  // hub -> PE: the job failed (payload: failure); the connection closes after it
  coll = 4,     // PE -> hub: my part of collective #seq (payload: coll_header + data)
  result = 5,   // hub -> PE: my result of collective #seq (payload: data)
  bye = 6,      // PE -> hub: I finalize after `seq` collectives (no payload)
  welcome = 7,  // hub -> PE: your hello is accepted; the table or a failure follows (no payload)
};

struct header {
  msg_type type{};
  std::uint64_t seq = 0;
  std::uint64_t size = 0;
};

using header_bytes = std::array<std::byte, kHeaderBytes>;
header_bytes encode_header(const header& h);
// Rejects a wrong magic, another protocol version or an unknown type; `why` says which.
std::optional<header> decode_header(std::span<const std::byte, kHeaderBytes> bytes, std::string* why = nullptr);

struct hello {
  std::string secret;
  std::int32_t pe = -1;
  std::int32_t n_pes = 0;
  std::int64_t pid = 0;
  std::string host;       // node identity: SHOAL_NODE_ID or the host name
  std::string fd_socket;  // abstract Unix socket name this PE receives descriptors on
};
std::vector<std::byte> encode_hello(const hello& h);
std::optional<hello> decode_hello(std::span<const std::byte> payload, std::string* why = nullptr);

// What every PE learns about every other, indexed by pe.
struct peer_info {
  std::string host;
  std::int64_t pid = 0;
  std::string fd_socket;
  bool operator==(const peer_info&) const = default;
};
std::vector<std::byte> encode_table(std::span<const peer_info> peers);
std::optional<std::vector<peer_info>> decode_table(std::span<const std::byte> payload, std::string* why = nullptr);

struct failure {
  errc category = errc::bootstrap;
  std::string message;
};
std::vector<std::byte> encode_failure(const failure& f);
std::optional<failure> decode_failure(std::span<const std::byte> payload, std::string* why = nullptr);

enum class coll_kind : std::uint8_t { all_gather = 1, broadcast = 2, barrier = 3, alltoall = 4 };
const char* to_string(coll_kind kind) noexcept;

// Leads every coll payload, so the hub can check that all PEs called the same collective the same way.
// `bytes` is the block size the caller passed; the data that follows is, per kind:
// all_gather: bytes; broadcast: bytes at the root, nothing elsewhere; barrier: nothing; alltoall: n_pes * bytes.
struct coll_header {
  coll_kind kind = coll_kind::barrier;
  std::int32_t root = 0;
  std::uint64_t bytes = 0;
  bool operator==(const coll_header&) const = default;
};
inline constexpr std::size_t kCollHeaderBytes = 16;
std::array<std::byte, kCollHeaderBytes> encode_coll_header(const coll_header& h);
std::optional<coll_header> decode_coll_header(std::span<const std::byte> payload, std::string* why = nullptr);
// Payload bytes that follow the coll header for PE `pe`, or nullopt when the sizes overflow.
std::optional<std::uint64_t> coll_data_bytes(const coll_header& h, int pe, int n_pes);
// "all_gather of 16 bytes", "broadcast of 8 bytes from PE 1": for messages about mismatches.
std::string describe(const coll_header& h);

}  // namespace shoal::detail::wire
