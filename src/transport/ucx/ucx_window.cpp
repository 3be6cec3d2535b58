// Payload windows of the UCX engine (network::open_payload_window): host memory that UCX allocates
// (ucp_mem_map with UCP_MEM_MAP_ALLOCATE, shared memory where the shared-memory transports are on), which
// each peer maps into its own address space with ucp_rkey_ptr where it can. Sends from it travel by
// reference (ucx_messages.cpp); the receiver gives each payload back with a kReturnAm message.
#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "base/log.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"
#include "transport/ucx/ucx_network.hpp"

namespace shoal::detail::ucx {
namespace {

// What each PE says about its window, gathered before the rkeys.
struct window_record {
  std::uint64_t base = 0;
  std::uint64_t bytes = 0;  // 0: this PE has no window
  std::uint64_t rkey_bytes = 0;
};

}  // namespace

std::span<std::byte> ucx_network::open_payload_window(std::size_t bytes, payload_view_check usable) {
  if (window_memh_ != nullptr) throw error(errc::invalid_argument, "network::open_payload_window", "opened twice");
  window_record mine;
  void* packed = nullptr;
  std::size_t packed_bytes = 0;
  if (bytes > 0) {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = nullptr;
    mp.length = bytes;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    ucs_status_t s = ucp_mem_map(context_, &mp, &window_memh_);
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    if (s == UCS_OK) s = ucp_mem_query(window_memh_, &attr);
    if (s == UCS_OK) s = ucp_rkey_pack(context_, window_memh_, &packed, &packed_bytes);
    if (s == UCS_OK) {
      mine = {.base = reinterpret_cast<std::uint64_t>(attr.address), .bytes = bytes, .rkey_bytes = packed_bytes};
      window_ = {static_cast<std::byte*>(attr.address), bytes};
    } else {
      SHOAL_LOG_INFO(transport, "UCX: no payload window ({} bytes): {}", bytes, ucs_status_string(s));
      if (window_memh_) ucp_mem_unmap(context_, std::exchange(window_memh_, nullptr));
    }
  }

  std::vector<window_record> all(peers_.size());
  std::uint64_t widest = 0;
  std::vector<std::byte> keys;
  try {
    collective([&] { boot_->all_gather(&mine, all.data(), sizeof mine); });
    for (const window_record& r : all) widest = std::max(widest, r.rkey_bytes);
    std::vector<std::byte> padded(widest);
    if (packed_bytes) std::memcpy(padded.data(), packed, packed_bytes);
    keys.resize(widest * peers_.size());
    if (widest) collective([&] { boot_->all_gather(padded.data(), keys.data(), widest); });
  } catch (...) {
    if (packed) ucp_rkey_buffer_release(packed);
    throw;
  }
  if (packed) ucp_rkey_buffer_release(packed);

  // Map every peer's window where UCX can, and keep the views this PE can use.
  std::vector<std::uint8_t> kept(peers_.size(), 0);
  for (peer& p : peers_) {
    const window_record& r = all[static_cast<std::size_t>(p.pe)];
    if (p.pe == pe_ || r.bytes == 0 || p.failed) continue;
    ucp_rkey_h rkey = nullptr;
    void* local = nullptr;
    ucs_status_t s = ucp_ep_rkey_unpack(p.ep, keys.data() + widest * static_cast<std::size_t>(p.pe), &rkey);
    if (s == UCS_OK) s = ucp_rkey_ptr(rkey, r.base, &local);
    const std::span<const std::byte> view(static_cast<const std::byte*>(local), r.bytes);
    if (s == UCS_OK && (usable.fn == nullptr || usable.fn(usable.ctx, view))) {
      p.window_view = view;
      p.window_rkey = rkey;
      kept[static_cast<std::size_t>(p.pe)] = 1;
    } else {
      SHOAL_LOG_DEBUG(transport, "UCX: PE {}'s payload window not read in place: {}", p.pe,
                      s == UCS_OK ? "refused" : ucs_status_string(s));
      if (rkey) ucp_rkey_destroy(rkey);
    }
  }
  // Every sender learns which receivers read its window in place.
  std::vector<std::uint8_t> everyone(peers_.size() * peers_.size());
  collective([&] { boot_->all_gather(kept.data(), everyone.data(), kept.size()); });
  int viewers = 0;
  for (peer& p : peers_) {
    p.views_my_window = everyone[static_cast<std::size_t>(p.pe) * peers_.size() + static_cast<std::size_t>(pe_)] != 0;
    viewers += p.views_my_window;
  }
  SHOAL_LOG_INFO(transport, "UCX: payload window of {} bytes, read in place by {} of {} peers", window_.size(), viewers,
                 n_pes_ - 1);
  return window_;
}

void ucx_network::return_borrowed(int pe, std::uint64_t token) {
  check_pe("network::return_borrowed", pe);
  peer& p = peers_[static_cast<std::size_t>(pe)];
  if (p.failed || token == 0) return;
  op* o = take_op(op_kind::send, pe, {});
  std::memcpy(o->inline_header, &token, sizeof token);
  ucp_request_param_t rp = request_param(o);
  issued(o, ucp_am_send_nbx(p.ep, kReturnAm, o->inline_header, sizeof token, nullptr, 0, &rp));
}

// In a UCX callback: a receiver is done with a payload of ours; its send completes (the second of its two
// parts, the first being the message's own send).
void ucx_network::payload_returned(const void* header, std::size_t header_bytes) {
  std::uint64_t token = 0;
  if (header_bytes == sizeof token) std::memcpy(&token, header, sizeof token);
  const auto it = lent_out_.find(token);
  if (it == lent_out_.end()) {
    if (window_.empty()) return;  // closed at shutdown: its sends were canceled
    SHOAL_LOG_ERROR(transport, "UCX: a payload return for token {}, which is not out; dropped", token);
    return;
  }
  op* o = it->second;
  lent_out_.erase(it);
  complete(o, UCS_OK);
}

void ucx_network::close_payload_window() noexcept {
  for (peer& p : peers_) {
    if (p.window_rkey) ucp_rkey_destroy(std::exchange(p.window_rkey, nullptr));
    p.window_view = {};
    p.views_my_window = false;
  }
  lent_out_.clear();
  window_ = {};
  if (window_memh_) ucp_mem_unmap(context_, std::exchange(window_memh_, nullptr));
}

}  // namespace shoal::detail::ucx
