#include "bootstrap/wire.hpp"

#include <fmt/format.h>

#include <cstring>

namespace shoal::detail::wire {
namespace {

// Appends little-endian fields to a byte vector.
class writer {
 public:
  template <typename T>
  void integer(T value) {
    auto u = static_cast<std::make_unsigned_t<T>>(value);
    for (std::size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<std::byte>(u >> (8 * i) & 0xff));
  }
  // Strings longer than kMaxStringBytes are the caller's bug; they are cut so the peer can decode them.
  void string(std::string_view s) {
    s = s.substr(0, kMaxStringBytes);
    integer(static_cast<std::uint16_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

// Reads little-endian fields; the first short read or over-long field sets a reason and every later read fails.
class reader {
 public:
  explicit reader(std::span<const std::byte> in) : in_(in) {}

  template <typename T>
  bool integer(T& value) {
    if (!need(sizeof(T), "truncated")) return false;
    std::make_unsigned_t<T> u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) u |= static_cast<std::make_unsigned_t<T>>(in_[pos_ + i]) << (8 * i);
    pos_ += sizeof(T);
    value = static_cast<T>(u);
    return true;
  }
  bool string(std::string& s) {
    std::uint16_t n = 0;
    if (!integer(n)) return false;
    if (n > kMaxStringBytes) return fail(fmt::format("a string field of {} bytes (at most {})", n, kMaxStringBytes));
    if (!need(n, "truncated string")) return false;
    s.assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  // True when everything was read and nothing is left over.
  bool done(std::string* why) {
    if (why_.empty() && pos_ != in_.size()) why_ = fmt::format("{} unexpected trailing bytes", in_.size() - pos_);
    if (why && !why_.empty()) *why = why_;
    return why_.empty();
  }
  bool fail(std::string why) {
    if (why_.empty()) why_ = std::move(why);
    return false;
  }
  std::size_t left() const { return in_.size() - pos_; }
  bool ok() const { return why_.empty(); }

 private:
  bool need(std::size_t n, const char* why) {
    if (!why_.empty()) return false;
    if (in_.size() - pos_ < n) return fail(why);
    return true;
  }
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
  std::string why_;
};

}  // namespace

header_bytes encode_header(const header& h) {
  writer w;
  w.integer(kMagic);
  w.integer(kVersion);
  w.integer(static_cast<std::uint16_t>(h.type));
  w.integer(h.seq);
  w.integer(h.size);
  std::vector<std::byte> v = w.take();
  header_bytes out;
  std::memcpy(out.data(), v.data(), kHeaderBytes);
  return out;
}

std::optional<header> decode_header(std::span<const std::byte, kHeaderBytes> bytes, std::string* why) {
  reader r(bytes);
  std::uint32_t magic = 0;
  std::uint16_t version = 0, type = 0;
  header h;
  r.integer(magic);
  r.integer(version);
  r.integer(type);
  r.integer(h.seq);
  r.integer(h.size);
  if (magic != kMagic) r.fail(fmt::format("bad magic 0x{:08x} (not a shoal bootstrap message)", magic));
  if (version != kVersion) r.fail(fmt::format("protocol version {} (this library speaks {})", version, kVersion));
  if (type < static_cast<std::uint16_t>(msg_type::hello) || type > static_cast<std::uint16_t>(msg_type::welcome))
    r.fail(fmt::format("unknown message type {}", type));
  if (!r.done(why)) return std::nullopt;
  h.type = static_cast<msg_type>(type);
  return h;
}

std::vector<std::byte> encode_hello(const hello& h) {
  writer w;
  w.string(h.secret);
  w.integer(h.pe);
  w.integer(h.n_pes);
  w.integer(h.pid);
  w.string(h.host);
  w.string(h.fd_socket);
  return w.take();
}

std::optional<hello> decode_hello(std::span<const std::byte> payload, std::string* why) {
  reader r(payload);
  hello h;
  r.string(h.secret);
  r.integer(h.pe);
  r.integer(h.n_pes);
  r.integer(h.pid);
  r.string(h.host);
  r.string(h.fd_socket);
  if (!r.done(why)) return std::nullopt;
  return h;
}

std::vector<std::byte> encode_table(std::span<const peer_info> peers) {
  writer w;
  w.integer(static_cast<std::uint32_t>(peers.size()));
  for (const peer_info& p : peers) {
    w.string(p.host);
    w.integer(p.pid);
    w.string(p.fd_socket);
  }
  return w.take();
}

std::optional<std::vector<peer_info>> decode_table(std::span<const std::byte> payload, std::string* why) {
  reader r(payload);
  std::uint32_t n = 0;
  r.integer(n);
  // Each entry takes at least 12 bytes; a count the payload cannot hold is corrupt (and must not allocate).
  if (n > r.left() / 12) r.fail(fmt::format("a table of {} entries in {} bytes", n, payload.size()));
  std::vector<peer_info> peers;
  for (std::uint32_t i = 0; i < n && r.ok(); ++i) {
    peer_info p;
    r.string(p.host);
    r.integer(p.pid);
    r.string(p.fd_socket);
    peers.push_back(std::move(p));
  }
  if (peers.size() != n) r.fail("truncated table");
  if (!r.done(why)) return std::nullopt;
  return peers;
}

std::vector<std::byte> encode_failure(const failure& f) {
  writer w;
  w.integer(static_cast<std::uint32_t>(f.category));
  w.string(f.message);
  return w.take();
}

std::optional<failure> decode_failure(std::span<const std::byte> payload, std::string* why) {
  reader r(payload);
  std::uint32_t category = 0;
  failure f;
  r.integer(category);
  r.string(f.message);
  if (category > static_cast<std::uint32_t>(errc::internal)) r.fail(fmt::format("unknown error category {}", category));
  if (!r.done(why)) return std::nullopt;
  f.category = static_cast<errc>(category);
  return f;
}

const char* to_string(coll_kind kind) noexcept {
  switch (kind) {
    case coll_kind::all_gather:
      return "all_gather";
    case coll_kind::broadcast:
      return "broadcast";
    case coll_kind::barrier:
      return "barrier";
    case coll_kind::alltoall:
      return "alltoall";
  }
  return "unknown collective";
}

std::array<std::byte, kCollHeaderBytes> encode_coll_header(const coll_header& h) {
  writer w;
  w.integer(static_cast<std::uint32_t>(h.kind));
  w.integer(h.root);
  w.integer(h.bytes);
  std::vector<std::byte> v = w.take();
  std::array<std::byte, kCollHeaderBytes> out;
  std::memcpy(out.data(), v.data(), kCollHeaderBytes);
  return out;
}

std::optional<coll_header> decode_coll_header(std::span<const std::byte> payload, std::string* why) {
  if (payload.size() < kCollHeaderBytes) {
    if (why) *why = "truncated collective header";
    return std::nullopt;
  }
  reader r(payload.first(kCollHeaderBytes));
  std::uint32_t kind = 0;
  coll_header h;
  r.integer(kind);
  r.integer(h.root);
  r.integer(h.bytes);
  if (kind < static_cast<std::uint32_t>(coll_kind::all_gather) ||
      kind > static_cast<std::uint32_t>(coll_kind::alltoall))
    r.fail(fmt::format("unknown collective kind {}", kind));
  if (!r.done(why)) return std::nullopt;
  h.kind = static_cast<coll_kind>(kind);
  return h;
}

std::optional<std::uint64_t> coll_data_bytes(const coll_header& h, int pe, int n_pes) {
  switch (h.kind) {
    case coll_kind::all_gather:
      return h.bytes;
    case coll_kind::broadcast:
      return pe == h.root ? h.bytes : 0;
    case coll_kind::barrier:
      return 0;
    case coll_kind::alltoall:
      if (n_pes > 0 && h.bytes > kMaxPayloadBytes / static_cast<std::uint64_t>(n_pes)) return std::nullopt;
      return h.bytes * static_cast<std::uint64_t>(n_pes);
  }
  return std::nullopt;
}

std::string describe(const coll_header& h) {
  switch (h.kind) {
    case coll_kind::barrier:
      return "barrier";
    case coll_kind::broadcast:
      return fmt::format("broadcast of {} bytes from PE {}", h.bytes, h.root);
    default:
      return fmt::format("{} of {} bytes", to_string(h.kind), h.bytes);
  }
}

}  // namespace shoal::detail::wire
