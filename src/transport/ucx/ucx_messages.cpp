// Messages of the UCX engine: UCP active messages with a sequence number per ordered pair of PEs, put back
// into send order on arrival. UCP promises no order between active messages (a rendezvous message's data
// lands after eager messages sent later; several lanes may race), and the contract promises FIFO.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/log.hpp"
#include "shoal/error.hpp"
#include "transport/ucx/ucx_network.hpp"

namespace shoal::detail::ucx {
namespace {

void rendezvous_cb(void* request, ucs_status_t status, std::size_t /*length*/, void* user_data) {
  if (request) ucp_request_free(request);
  auto* m = static_cast<inbound*>(user_data);
  m->net->rendezvous_done(m, status);
}

// Inbound buffers stay pooled with their capacity, up to this; larger ones give their memory back.
constexpr std::size_t kKeptCapacity = std::size_t{1} << 20;

}  // namespace

void ucx_network::send(int pe, std::uint8_t handler, std::span<const std::byte> header,
                       std::span<const std::byte> payload, network_done done) {
  check_pe("network::send", pe);
  check_handler("network::send", handler);
  peer& p = peers_[static_cast<std::size_t>(pe)];
  if (p.failed) return finish_now(done, network_status::peer_failed);

  op* o = take_op(op_kind::send, pe, done);
  wire_header w{};
  w.seq = p.next_send_seq++;
  SHOAL_LOG_TRACE(transport, "UCX: message #{} to PE {}, handler {}", w.seq, pe, unsigned(handler));
  w.from = static_cast<std::uint32_t>(pe_);
  w.header_bytes = static_cast<std::uint32_t>(header.size());
  w.handler = handler;
  const std::size_t by_reference_bytes = sizeof w + sizeof(window_ref) + header.size();
  if (pe != pe_ && p.views_my_window && lies_within(payload, window_) &&
      by_reference_bytes <= std::min(max_am_header_, op::kInlineHeader)) {
    // Only the headers cross; the receiver reads the payload in our window and returns it (kReturnAm).
    w.flags = kPayloadInWindow;
    const window_ref ref{.offset = static_cast<std::uint64_t>(payload.data() - window_.data()),
                         .bytes = payload.size(),
                         .token = next_token_++};
    std::memcpy(o->inline_header, &w, sizeof w);
    std::memcpy(o->inline_header + sizeof w, &ref, sizeof ref);
    if (!header.empty()) std::memcpy(o->inline_header + sizeof w + sizeof ref, header.data(), header.size());
    o->pending = 2;  // the message's send, and the payload's return
    lent_out_.emplace(ref.token, o);
    ucp_request_param_t rp = request_param(o);
    issued(o, ucp_am_send_nbx(p.ep, kMessageAm, o->inline_header, by_reference_bytes, nullptr, 0, &rp));
    return;
  }
  const std::size_t framed = sizeof w + header.size();
  const void* ucp_header = o->inline_header;
  std::size_t ucp_header_bytes = framed;
  const void* data = payload.data();
  std::size_t bytes = payload.size();
  if (framed <= max_am_header_) {
    std::byte* buffer = o->inline_header;
    if (framed > op::kInlineHeader) {
      o->heap_bytes.resize(framed);
      buffer = o->heap_bytes.data();
      ucp_header = buffer;
    }
    std::memcpy(buffer, &w, sizeof w);
    if (!header.empty()) std::memcpy(buffer + sizeof w, header.data(), header.size());
  } else {
    // Past UCP's header limit: the user's header goes first in the data (one copy, rare).
    w.flags = kHeaderInData;
    std::memcpy(o->inline_header, &w, sizeof w);
    ucp_header_bytes = sizeof w;
    o->heap_bytes.resize(header.size() + payload.size());
    std::memcpy(o->heap_bytes.data(), header.data(), header.size());
    if (!payload.empty()) std::memcpy(o->heap_bytes.data() + header.size(), payload.data(), payload.size());
    data = o->heap_bytes.data();
    bytes = o->heap_bytes.size();
  }
  ucp_request_param_t rp = request_param(o);
  issued(o, ucp_am_send_nbx(p.ep, kMessageAm, ucp_header, ucp_header_bytes, bytes ? data : nullptr, bytes, &rp));
}

// In a UCX callback: copy eager data now, or start receiving rendezvous data into our own buffer.
void ucx_network::message_arrived(const void* header, std::size_t header_bytes, void* data, std::size_t bytes,
                                  const ucp_am_recv_param_t* param) {
  wire_header w{};
  if (header_bytes < sizeof w) {
    SHOAL_LOG_ERROR(transport, "UCX: a message with a {}-byte header (not from shoal) dropped", header_bytes);
    return;
  }
  std::memcpy(&w, header, sizeof w);
  if (w.from >= peers_.size() || w.handler >= kNetworkHandlers) {
    SHOAL_LOG_ERROR(transport, "UCX: a message from PE {} for handler {} (not from this job) dropped", w.from,
                    w.handler);
    return;
  }
  SHOAL_LOG_TRACE(transport, "UCX: message #{} from PE {} arrived ({} header, {} data bytes, flags {})", w.seq, w.from,
                  header_bytes, bytes, unsigned(w.flags));
  inbound* m = take_inbound();
  m->from = static_cast<int>(w.from);
  m->handler = w.handler;
  m->seq = w.seq;
  const auto* h = static_cast<const std::byte*>(header);
  if (w.flags & kPayloadInWindow) return borrow_payload(m, h + sizeof w, header_bytes - sizeof w);
  m->header.assign(h + sizeof w, h + header_bytes);
  m->data_header_bytes = (w.flags & kHeaderInData) ? w.header_bytes : 0;
  const network_lender& lender = lenders_[w.handler];
  if (lender.lend && bytes != 0 && bytes >= lender.min_bytes && m->data_header_bytes == 0) {
    m->lent = lender.lend(lender.ctx, bytes);
    m->lent_bytes = bytes;
  }
  std::byte* into = m->lent;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    if (!into) {
      m->data.resize(bytes);
      into = m->data.data();
    }
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = rendezvous_cb;
    rp.user_data = m;
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(worker_, data, into, bytes, &rp);
    if (r == nullptr) {
      m->ready = true;
    } else if (UCS_PTR_IS_ERR(r)) {
      m->ready = m->failed = true;
    }
  } else {
    const auto* d = static_cast<const std::byte*>(data);
    if (into)
      std::memcpy(into, d, bytes);
    else
      m->data.assign(d, d + bytes);
    m->ready = true;
  }
  hold(m);
}

// A message whose payload stays in its sender's window: `rest` is its window_ref and the user's header.
// A reference outside the window this PE mapped is not read: the message is lost (and logged at
// delivery), its payload returned.
void ucx_network::borrow_payload(inbound* m, const std::byte* rest, std::size_t rest_bytes) {
  window_ref ref{};
  if (rest_bytes >= sizeof ref) std::memcpy(&ref, rest, sizeof ref);
  const std::span<const std::byte> view = peers_[static_cast<std::size_t>(m->from)].window_view;
  m->token = ref.token;
  m->ready = true;
  if (rest_bytes < sizeof ref || ref.offset > view.size() || ref.bytes > view.size() - ref.offset) {
    SHOAL_LOG_ERROR(transport, "UCX: a message from PE {} refers to [{}, +{}) of a {}-byte window it cannot be read in",
                    m->from, ref.offset, ref.bytes, view.size());
    m->failed = true;
  } else {
    m->borrowed = view.subspan(ref.offset, ref.bytes);
    m->header.assign(rest + sizeof ref, rest + rest_bytes);
  }
  hold(m);
}

void ucx_network::rendezvous_done(inbound* m, ucs_status_t status) {
  m->ready = true;
  m->failed = status != UCS_OK;
  hold(m);
}

// Files `m` (new, or just completed) and moves every message that is now next in its sender's order and
// complete to the ready queue.
void ucx_network::hold(inbound* m) {
  peer& p = peers_[static_cast<std::size_t>(m->from)];
  if (m->seq == p.next_recv_seq && m->ready && p.held.empty()) {  // the common case: in order, no map
    ++p.next_recv_seq;
    ready_.push_back(m);
    return;
  }
  SHOAL_LOG_TRACE(transport, "UCX: message #{} from PE {} held (ready {}), #{} is next", m->seq, m->from, m->ready,
                  p.next_recv_seq);
  p.held.emplace(m->seq, m);  // no-op for a rendezvous message already held
  while (!p.held.empty() && p.held.begin()->first == p.next_recv_seq && p.held.begin()->second->ready) {
    ready_.push_back(p.held.begin()->second);
    p.held.erase(p.held.begin());
    ++p.next_recv_seq;
  }
}

void ucx_network::deliver(inbound* m) {
  struct give_back {
    ucx_network* net;
    inbound* m;
    ~give_back() { net->release_inbound(m); }
  } guard{this, m};
  // A lost message cannot be skipped: the ones after it (a put_signal's signal after its data, the ack
  // its sender waits for) would be applied as if it had landed. The engine fails, naming the peer.
  if (m->failed)
    throw error(errc::peer_failure, "network::progress",
                fmt::format("UCX: message #{} from PE {} was lost (its data could not be received); the messages "
                            "after it are not applied",
                            m->seq, m->from));
  const handler_slot& h = handlers_[m->handler];
  if (!h.fn)
    throw error(errc::internal, "network::progress",
                fmt::format("a message from PE {} for handler {}, which nobody installed", m->from, m->handler));
  network_message message{.from = m->from};
  const std::span<const std::byte> data(m->data);
  if (m->token != 0) {  // the handler returns it (network::return_borrowed)
    message.header = m->header;
    message.payload = m->borrowed;
    message.borrowed = std::exchange(m->token, 0);
  } else if (m->lent) {  // the handler owns the buffer from here on
    message.header = m->header;
    message.payload = {m->lent, m->lent_bytes};
    message.lent = std::exchange(m->lent, nullptr);
  } else if (m->data_header_bytes > 0) {
    message.header = data.first(m->data_header_bytes);
    message.payload = data.subspan(m->data_header_bytes);
  } else {
    message.header = m->header;
    message.payload = data;
  }
  h.fn(h.ctx, message);
}

inbound* ucx_network::take_inbound() {
  if (free_inbound_.empty()) {
    inbound_all_.push_back(std::make_unique<inbound>());
    inbound_all_.back()->net = this;
    free_inbound_.push_back(inbound_all_.back().get());
  }
  inbound* m = free_inbound_.back();
  free_inbound_.pop_back();
  m->ready = m->failed = false;
  m->data_header_bytes = 0;
  return m;
}

void ucx_network::release_inbound(inbound* m) noexcept {
  if (m->lent) {  // never delivered: the buffer goes back to its lender
    const network_lender& lender = lenders_[m->handler];
    if (lender.give_back) lender.give_back(lender.ctx, m->lent);
    m->lent = nullptr;
  }
  if (m->token != 0) return_borrowed(m->from, std::exchange(m->token, 0));  // never delivered
  m->borrowed = {};
  m->header.clear();
  m->data.clear();
  if (m->data.capacity() > kKeptCapacity) m->data.shrink_to_fit();
  free_inbound_.push_back(m);
}

}  // namespace shoal::detail::ucx
