// What arrives at a proxy engine: peers' requests, applied to this PE's memory in arrival order and
// answered after the next flush; replies to this PE's own requests; and completions of sends.
#include <fmt/format.h>

#include "base/log.hpp"
#include "transport/proxy_engine_core.hpp"

namespace shoal::detail {

namespace {

const char* kind_name(proxy_wire_kind k) {
  switch (k) {
    case proxy_wire_kind::put_data:
      return "put data";
    case proxy_wire_kind::get_request:
      return "get request";
    case proxy_wire_kind::signal:
      return "signal";
    case proxy_wire_kind::atomic:
      return "atomic";
    case proxy_wire_kind::ping:
      return "ping";
    case proxy_wire_kind::ack:
      return "ack";
    case proxy_wire_kind::get_data:
      return "get data";
    case proxy_wire_kind::atomic_result:
      return "atomic result";
  }
  return "message";
}

}  // namespace

void proxy_engine_core::bad_message(int from, const char* what) {
  // A peer speaking another protocol, or corruption. Fail-stop, like every engine failure: the engine stops
  // serving every peer, and each PE's next call throws the report. Serving the others on would let a job whose
  // messages can no longer be trusted run on, where the sender's later writes to this PE are lost unseen.
  fail(errc::internal, -1, std::nullopt, fmt::format("a message from PE {} does not decode: {}", from, what));
}

bool proxy_engine_core::accept(const network_message& m, bool request, proxy_wire_header& h) {
  if (m.from < 0 || m.from >= static_cast<int>(peers_.size())) {
    bad_message(m.from, "sender is not a PE of the job");
    return false;
  }
  const std::uint64_t mapped = mapped_limits().heap_bytes;
  if (const char* what = proxy_wire_check(m.header, m.payload.size(), mapped, h)) {
    if (mapped < limits_.heap_bytes && !proxy_wire_check(m.header, m.payload.size(), limits_.heap_bytes, h)) {
      // The sender checked the range against its own mapped heap, which a growth's meeting makes equal to
      // ours: one of the two is wrong about it.
      fail(errc::internal, m.from, h.request,
           fmt::format("a message from PE {} names heap bytes beyond the {} mapped here: {}", m.from, mapped, what));
    } else {
      bad_message(m.from, what);
    }
    return false;
  }
  if (request ? !proxy_wire_is_request(h.kind) : !proxy_wire_is_reply(h.kind)) {
    bad_message(m.from, request ? "a reply sent as a request" : "a request sent as a reply");
    return false;
  }
  peers_[m.from].last_heard = now_;
  return true;
}

// A lent or borrowed payload was written out by local_memory calls that complete at the next flush: it
// is held until then (settle()), whatever became of the message.
void proxy_engine_core::hold(const network_message& m) {
  if (m.lent) held_lent_.push_back(m.lent);
  if (m.borrowed != 0) {
    held_borrowed_.push_back({m.from, m.borrowed});
    count(n_borrowed_);
  }
}

void proxy_engine_core::on_request_message(void* ctx, const network_message& m) {
  auto* core = static_cast<proxy_engine_core*>(ctx);
  SHOAL_LOG_TRACE(proxy, "a request message from PE {}, {} payload bytes", m.from, m.payload.size());
  proxy_wire_header h;
  core->hold(m);
  if (core->accept(m, true, h)) core->serve(m, h);
}

void proxy_engine_core::on_reply_message(void* ctx, const network_message& m) {
  auto* core = static_cast<proxy_engine_core*>(ctx);
  proxy_wire_header h;
  core->hold(m);
  if (core->accept(m, false, h)) core->reply(m, h);
}

// Applies one peer request. The reply is staged now and sent by settle() after the flush that completes
// the memory operation, so a reply always means "applied and visible at the target".
void proxy_engine_core::serve(const network_message& m, const proxy_wire_header& h) {
  if (h.kind == proxy_wire_kind::ping) return;
  SHOAL_LOG_TRACE(proxy, "from PE {}: {} of its request {}", m.from, kind_name(h.kind), h.request);
  count(n_served_);
  proxy_wire_header r{.request = h.request, .chunk_offset = h.chunk_offset};
  switch (h.kind) {
    case proxy_wire_kind::put_data:
      memory_.write(local_ref::heap(h.offset), m.payload.data(), m.payload.size());
      r.kind = proxy_wire_kind::ack;
      r.bytes = h.bytes;
      stage(m.from, kProxyReplyHandler, r, 0);
      return;
    case proxy_wire_kind::get_request: {
      r.kind = proxy_wire_kind::get_data;
      r.bytes = h.bytes;
      proxy_outgoing* out = stage(m.from, kProxyReplyHandler, r, h.bytes);
      memory_.read(local_ref::heap(h.offset), out->payload, h.bytes);
      return;
    }
    case proxy_wire_kind::signal:
      memory_.signal(h.signal_offset, h.signal_op, h.value);
      r.kind = proxy_wire_kind::ack;
      stage(m.from, kProxyReplyHandler, r, 0);
      return;
    case proxy_wire_kind::atomic: {
      r.kind = proxy_wire_kind::atomic_result;
      proxy_outgoing* out = stage(m.from, kProxyReplyHandler, r, 0);
      // The old value lands in the staged reply's header by the flush, before settle() sends it.
      memory_.atomic(h.offset,
                     local_atomic{.op = h.atomic_op, .type = h.atomic_type, .value = h.value, .compare = h.compare},
                     &out->header.value);
      return;
    }
    default:
      return bad_message(m.from, "not a request");
  }
}

// A reply to one of this PE's requests: it must match an outstanding request to that peer and fit in it.
void proxy_engine_core::reply(const network_message& m, const proxy_wire_header& h) {
  SHOAL_LOG_TRACE(proxy, "from PE {}: {} for request {}", m.from, kind_name(h.kind), h.request);
  proxy_pending& p = requests_[h.request & (requests_.size() - 1)];
  const proxy_request& r = p.request;
  if (!p.active || r.sequence != h.request || r.pe != m.from)
    return bad_message(m.from, "reply to no outstanding request of this PE to it");
  proxy_peer& peer = peers_[m.from];
  const bool fits = h.chunk_offset <= r.size && h.bytes <= r.size - h.chunk_offset && h.bytes <= options_.chunk_bytes &&
                    h.bytes <= peer.window_bytes;
  bool ok = false;
  switch (h.kind) {
    case proxy_wire_kind::ack:
      if (h.bytes != 0)  // a put chunk
        ok = fits && (r.op == proxy_op::put || r.op == proxy_op::put_signal);
      else  // a signal
        ok = (r.op == proxy_op::signal || r.op == proxy_op::put_signal) && h.chunk_offset == r.size;
      break;
    case proxy_wire_kind::get_data:
      ok = fits && r.op == proxy_op::get && h.bytes != 0;
      if (ok)
        memory_.write(local_ref{r.local + h.chunk_offset, r.local_is_address, r.local_is_host}, m.payload.data(),
                      h.bytes);
      break;
    case proxy_wire_kind::atomic_result:
      ok = r.op == proxy_op::atomic;
      p.old_value = h.value;
      break;
    default:
      break;
  }
  if (!ok || p.replies >= p.replies_expected || peer.awaiting == 0)
    return bad_message(m.from, fmt::format("{} does not fit request {}", kind_name(h.kind), h.request).c_str());
  peer.window_bytes -= h.bytes;
  --peer.awaiting;
  --awaiting_;
  if (++p.replies == p.replies_expected) finish(h.request);
}

void proxy_engine_core::on_sent(void* ctx, network_status status, std::uint64_t) {
  std::unique_ptr<proxy_outgoing> out(static_cast<proxy_outgoing*>(ctx));
  proxy_engine_core* core = out->link->core;
  if (core == nullptr || status == network_status::ok) return;
  const proxy_wire_header& h = out->header;
  const bool ours = proxy_wire_is_request(h.kind);
  std::string what =
      ours ? (h.kind == proxy_wire_kind::ping ? std::string("a ping")
                                              : fmt::format("{} of request {}", kind_name(h.kind), h.request))
           : fmt::format("{} for its request {}", kind_name(h.kind), h.request);
  if (status == network_status::peer_failed)
    core->fail(errc::peer_failure, out->pe, std::nullopt,
               fmt::format("PE {} failed: {} to it did not go through", out->pe, what));
  else
    core->fail(errc::internal, out->pe, std::nullopt,
               fmt::format("the network was shut down under the engine: {} to PE {} canceled", what, out->pe));
}

}  // namespace shoal::detail
