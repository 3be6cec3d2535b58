// The messages proxy engines exchange (protocol v1, messages only): every ring request becomes requests
// to the target PE's engine, which applies them to its own memory in arrival order and replies. One
// fixed-size, versioned header per message; data travels as the message payload. Host-only, no CUDA.
// docs/proxy-design.md ("The proxy engine") has the protocol.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

#include "shoal/detail/proxy_descriptor.hpp"

namespace shoal::detail {

// Handler ids on the network (network.hpp allows 0 .. kNetworkHandlers - 1): requests go to the target's
// engine, replies come back to the initiator's.
inline constexpr std::uint8_t kProxyRequestHandler = 0;
inline constexpr std::uint8_t kProxyReplyHandler = 1;

inline constexpr std::uint16_t kProxyWireMagic = 0x5350;  // "PS"
inline constexpr std::uint8_t kProxyWireVersion = 1;

enum class proxy_wire_kind : std::uint8_t {
  // initiator -> target (kProxyRequestHandler)
  put_data = 1,  // payload: `bytes` bytes for heap [offset, +bytes)
  get_request,   // asks for heap [offset, +bytes); no payload
  signal,        // signal_op with `value` on the word at signal_offset; no payload
  atomic,        // atomic_op of atomic_type on the word at offset; no payload
  ping,          // liveness probe while replies are awaited; no reply
  // target -> initiator (kProxyReplyHandler); `request` and `chunk_offset` echo the request message
  ack,            // a put_data chunk (`bytes` of it) or a signal (`bytes` 0) was applied and flushed
  get_data,       // payload: `bytes` bytes of the requested range
  atomic_result,  // `value` is the old value
};

// Every message starts with this header (the network carries it separately from the payload). Fields a
// kind does not use are zero. Hosts of one job share a byte order, so it travels as it lies in memory.
struct proxy_wire_header {
  std::uint16_t magic = kProxyWireMagic;
  std::uint8_t version = kProxyWireVersion;
  proxy_wire_kind kind = proxy_wire_kind::ping;
  proxy_atomic_op atomic_op = proxy_atomic_op::fetch;
  proxy_atomic_type atomic_type = proxy_atomic_type::int32;
  proxy_signal_op signal_op = proxy_signal_op::set;
  std::uint8_t reserved = 0;
  std::uint64_t request = 0;       // the initiator's ring ticket: the request id
  std::uint64_t chunk_offset = 0;  // where this message's data starts within the request's data
  std::uint64_t offset = 0;        // put_data/get_request: target heap offset of this chunk; atomic: the word
  std::uint64_t bytes = 0;         // put_data/get_request/get_data: bytes of this chunk
  std::uint64_t value = 0;         // signal and atomic operand; atomic_result: the old value
  std::uint64_t compare = 0;       // compare_swap
  std::uint64_t signal_offset = 0;
};
static_assert(sizeof(proxy_wire_header) == 64, "fixed size: one header per message");
static_assert(std::is_trivially_copyable_v<proxy_wire_header>, "sent as raw bytes");

inline std::span<const std::byte> proxy_wire_bytes(const proxy_wire_header& h) {
  return {reinterpret_cast<const std::byte*>(&h), sizeof h};
}

constexpr bool proxy_wire_is_request(proxy_wire_kind k) {
  return k >= proxy_wire_kind::put_data && k <= proxy_wire_kind::ping;
}
constexpr bool proxy_wire_is_reply(proxy_wire_kind k) {
  return k >= proxy_wire_kind::ack && k <= proxy_wire_kind::atomic_result;
}

// Checks a received message against the protocol and this PE's heap; nullptr when it is well formed, else
// what is wrong. It does not check that a reply matches an outstanding request (the engine does).
inline const char* proxy_wire_check(std::span<const std::byte> header, std::size_t payload_bytes,
                                    std::uint64_t heap_bytes, proxy_wire_header& out) {
  if (header.size() != sizeof(proxy_wire_header)) return "header of the wrong size";
  std::memcpy(&out, header.data(), sizeof out);
  const proxy_wire_header& h = out;
  if (h.magic != kProxyWireMagic) return "bad magic";
  if (h.version != kProxyWireVersion) return "unsupported protocol version";
  if (!proxy_wire_is_request(h.kind) && !proxy_wire_is_reply(h.kind)) return "unknown message kind";
  if (h.reserved != 0) return "reserved field set";
  const bool atomic = h.kind == proxy_wire_kind::atomic;
  const bool signal = h.kind == proxy_wire_kind::signal;
  const bool with_payload = h.kind == proxy_wire_kind::put_data || h.kind == proxy_wire_kind::get_data;
  const bool counts_bytes = with_payload || h.kind == proxy_wire_kind::get_request || h.kind == proxy_wire_kind::ack;
  const bool has_offset = h.kind == proxy_wire_kind::put_data || h.kind == proxy_wire_kind::get_request || atomic;
  const bool has_value = signal || atomic || h.kind == proxy_wire_kind::atomic_result;
  if (payload_bytes != (with_payload ? h.bytes : 0)) return "payload size does not match the header";
  if (!atomic && (h.atomic_op != proxy_atomic_op{} || h.atomic_type != proxy_atomic_type{} || h.compare != 0))
    return "atomic field set";
  if (!signal && (h.signal_op != proxy_signal_op{} || h.signal_offset != 0)) return "signal field set";
  if (!counts_bytes && h.bytes != 0) return "byte count set";
  if (!has_offset && h.offset != 0) return "offset set";
  if (!has_value && h.value != 0) return "value set";
  if (h.kind == proxy_wire_kind::ping && (h.request != 0 || h.chunk_offset != 0)) return "ping with a request id";
  if (h.kind == proxy_wire_kind::put_data || h.kind == proxy_wire_kind::get_request) {
    if (!proxy_codec::in_heap(h.offset, h.bytes, heap_bytes)) return "data range beyond the heap";
  }
  if (signal) {
    if (static_cast<unsigned>(h.signal_op) >= kProxySignalOpCount) return "unknown signal op";
    if (!proxy_codec::in_heap(h.signal_offset, 8, heap_bytes) || h.signal_offset % 8 != 0)
      return "signal word beyond the heap or misaligned";
  }
  if (atomic) {
    // The codec's own rules for atomics, with the target's heap as the limit.
    proxy_request r{.op = proxy_op::atomic,
                    .atomic_op = h.atomic_op,
                    .atomic_type = h.atomic_type,
                    .remote_offset = h.offset,
                    .value = h.value,
                    .compare = h.compare};
    const proxy_status s = validate(r, proxy_limits{.n_pes = 1, .heap_bytes = heap_bytes, .completion_slots = 1});
    if (s != proxy_status::ok) return to_string(s);
  }
  return nullptr;
}

}  // namespace shoal::detail
