// Exposed memory and one-sided operations of the UCX engine: ucp_mem_map + packed rkeys exchanged through
// the bootstrap, then ucp_put_nbx / ucp_get_nbx / ucp_atomic_op_nbx on them, fence and flush.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/log.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"
#include "transport/ucx/ucx_network.hpp"

namespace shoal::detail::ucx {
namespace {

// What each PE says about its side of an expose(), gathered before the rkeys.
struct expose_record {
  std::uint32_t status;  // 0: mapped, 1: GPU memory unsupported, 2: ucp_mem_map or ucp_rkey_pack failed
  std::int32_t ucs_status;
  std::uint64_t base;
  std::uint64_t bytes;
  std::uint64_t rkey_bytes;
};

ucp_atomic_op_t to_ucp(network_atomic op) {
  switch (op) {
    case network_atomic::add:
      return UCP_ATOMIC_OP_ADD;
    case network_atomic::bit_and:
      return UCP_ATOMIC_OP_AND;
    case network_atomic::bit_or:
      return UCP_ATOMIC_OP_OR;
    case network_atomic::bit_xor:
      return UCP_ATOMIC_OP_XOR;
    case network_atomic::swap:
      return UCP_ATOMIC_OP_SWAP;
    case network_atomic::compare_swap:
      return UCP_ATOMIC_OP_CSWAP;
  }
  throw error(errc::invalid_argument, "network::atomic", fmt::format("operation {}", static_cast<int>(op)));
}

}  // namespace

network_region ucx_network::expose(void* base, std::size_t bytes, memory_kind kind) {
  expose_record mine{.status = 0,
                     .ucs_status = UCS_OK,
                     .base = reinterpret_cast<std::uint64_t>(base),
                     .bytes = bytes,
                     .rkey_bytes = 0};
  ucp_mem_h memh = nullptr;
  void* packed = nullptr;
  std::size_t packed_bytes = 0;
  if (kind == memory_kind::cuda && !caps_.cuda_memory) {
    mine.status = 1;
  } else if (bytes > 0) {
    ucp_mem_map_params_t mp{};
    mp.field_mask =
        UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.address = base;
    mp.length = bytes;
    mp.memory_type = kind == memory_kind::cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    ucs_status_t s = ucp_mem_map(context_, &mp, &memh);
    if (s == UCS_OK) s = ucp_rkey_pack(context_, memh, &packed, &packed_bytes);
    if (s != UCS_OK) {
      mine.status = 2;
      mine.ucs_status = s;
    }
    mine.rkey_bytes = packed_bytes;
  }
  auto undo = [&] {
    if (packed) ucp_rkey_buffer_release(std::exchange(packed, nullptr));
    if (memh) ucp_mem_unmap(context_, std::exchange(memh, nullptr));
  };

  region_state r;
  try {
    // Every PE learns every PE's outcome, so a refusal anywhere fails expose() everywhere.
    std::vector<expose_record> all(peers_.size());
    collective([&] { boot_->all_gather(&mine, all.data(), sizeof mine); });
    for (int q = 0; q < n_pes_; ++q) {
      const expose_record& e = all[static_cast<std::size_t>(q)];
      if (e.status == 1)
        throw error(errc::unsupported, "network::expose",
                    fmt::format("PE {} cannot expose GPU memory: this UCX has no CUDA support", q));
      if (e.status == 2)
        throw error(errc::system, "network::expose",
                    fmt::format("PE {} could not register {} bytes at {:#x}: {}", q, e.bytes, e.base,
                                ucs_status_string(static_cast<ucs_status_t>(e.ucs_status))));
    }
    std::uint64_t widest = 0;
    for (const expose_record& e : all) widest = std::max(widest, e.rkey_bytes);
    std::vector<std::byte> padded(widest), keys(widest * peers_.size());
    if (packed_bytes) std::memcpy(padded.data(), packed, packed_bytes);
    if (widest) collective([&] { boot_->all_gather(padded.data(), keys.data(), widest); });

    r.kind = kind;
    r.base.resize(peers_.size());
    r.bytes.resize(peers_.size());
    r.rkey.assign(peers_.size(), nullptr);
    for (int q = 0; q < n_pes_; ++q) {
      const expose_record& e = all[static_cast<std::size_t>(q)];
      r.base[q] = e.base;
      r.bytes[q] = e.bytes;
      if (e.rkey_bytes == 0 || peers_[q].failed) continue;
      ucs_status_t s = ucp_ep_rkey_unpack(peers_[q].ep, keys.data() + widest * q, &r.rkey[q]);
      if (s != UCS_OK) {
        r.rkey[q] = nullptr;
        SHOAL_LOG_WARN(transport, "UCX: the rkey of PE {} does not unpack ({}); operations on it will fail", q,
                       ucs_status_string(s));
      }
    }
  } catch (...) {
    for (ucp_rkey_h k : r.rkey)
      if (k) ucp_rkey_destroy(k);
    undo();
    throw;
  }
  if (packed) ucp_rkey_buffer_release(packed);
  r.memh = memh;
  r.live = true;
  // The lowest free id: every PE calls expose and withdraw in the same order, so ids agree.
  auto slot = std::find_if(regions_.begin(), regions_.end(), [](const region_state& s) { return !s.live; });
  if (slot == regions_.end()) slot = regions_.insert(regions_.end(), region_state{});
  *slot = std::move(r);
  return network_region{static_cast<std::uint32_t>(slot - regions_.begin())};
}

void ucx_network::withdraw(network_region region) {
  if (!region.valid() || region.id >= regions_.size() || !regions_[region.id].live)
    throw error(errc::invalid_argument, "network::withdraw", fmt::format("region {} is not exposed", region.id));
  collective([&] { boot_->barrier(); });  // every PE has flushed what it did on the region before anyone unmaps it
  region_state& r = regions_[region.id];
  for (ucp_rkey_h& k : r.rkey)
    if (k) ucp_rkey_destroy(std::exchange(k, nullptr));
  if (r.memh) ucp_mem_unmap(context_, std::exchange(r.memh, nullptr));
  r = region_state{};
}

const region_state& ucx_network::check_region(const char* call, int pe, network_region region, std::uint64_t offset,
                                              std::size_t bytes) const {
  check_pe(call, pe);
  if (!region.valid() || region.id >= regions_.size() || !regions_[region.id].live)
    throw error(errc::invalid_argument, call, fmt::format("region {} is not exposed", region.id));
  const region_state& r = regions_[region.id];
  const std::uint64_t size = r.bytes[static_cast<std::size_t>(pe)];
  if (offset > size || bytes > size - offset)
    throw error(
        errc::invalid_argument, call,
        fmt::format("[{}, +{}) lies outside region {} of PE {} ({} bytes)", offset, bytes, region.id, pe, size));
  return r;
}

void ucx_network::put(int pe, const void* local, std::size_t bytes, network_region region, std::uint64_t offset,
                      network_done done) {
  const region_state& r = check_region("network::put", pe, region, offset, bytes);
  if (bytes == 0) return finish_now(done, network_status::ok);
  const peer& p = peers_[static_cast<std::size_t>(pe)];
  if (p.failed || !r.rkey[pe]) return finish_now(done, network_status::peer_failed);
  op* o = take_op(op_kind::put, pe, done);
  ucp_request_param_t rp = request_param(o);
  issued(o, ucp_put_nbx(p.ep, local, bytes, r.base[pe] + offset, r.rkey[pe], &rp));
}

void ucx_network::get(int pe, void* local, std::size_t bytes, network_region region, std::uint64_t offset,
                      network_done done) {
  const region_state& r = check_region("network::get", pe, region, offset, bytes);
  if (bytes == 0) return finish_now(done, network_status::ok);
  const peer& p = peers_[static_cast<std::size_t>(pe)];
  if (p.failed || !r.rkey[pe]) return finish_now(done, network_status::peer_failed);
  op* o = take_op(op_kind::get, pe, done);
  ucp_request_param_t rp = request_param(o);
  issued(o, ucp_get_nbx(p.ep, local, bytes, r.base[pe] + offset, r.rkey[pe], &rp));
}

void ucx_network::atomic(int pe, network_atomic aop, unsigned width, bool fetch, network_region region,
                         std::uint64_t offset, std::uint64_t value, std::uint64_t compare, network_done done) {
  if (width != 4 && width != 8)
    throw error(errc::invalid_argument, "network::atomic", fmt::format("width {} (4 or 8 bytes)", width));
  if (offset % width != 0)
    throw error(errc::invalid_argument, "network::atomic",
                fmt::format("offset {} is not aligned to the {}-byte width", offset, width));
  const region_state& r = check_region("network::atomic", pe, region, offset, width);
  const ucp_atomic_op_t opcode = to_ucp(aop);
  const peer& p = peers_[static_cast<std::size_t>(pe)];
  if (p.failed || !r.rkey[pe]) return finish_now(done, network_status::peer_failed);

  op* o = take_op(op_kind::atomic, pe, done);
  o->width = width;
  o->fetch = fetch;
  // UCP: the operand is in `buffer` and the old value comes back in the reply buffer; swap and
  // compare-swap always reply. Compare-swap is "if (buffer == remote) remote = reply buffer", so there
  // `buffer` holds the value to compare and the reply buffer the new value.
  const bool cswap = aop == network_atomic::compare_swap;
  const std::uint64_t operand = cswap ? compare : value;
  const std::uint64_t replaced = cswap ? value : 0;
  o->operand32 = static_cast<std::uint32_t>(operand);
  o->operand64 = operand;
  o->reply32 = static_cast<std::uint32_t>(replaced);
  o->reply64 = replaced;
  ucp_request_param_t rp = request_param(o);
  rp.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
  rp.datatype = ucp_dt_make_contig(width);
  if (fetch || aop == network_atomic::swap || aop == network_atomic::compare_swap) {
    rp.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    rp.reply_buffer = width == 4 ? static_cast<void*>(&o->reply32) : static_cast<void*>(&o->reply64);
  }
  const void* buffer = width == 4 ? static_cast<const void*>(&o->operand32) : static_cast<const void*>(&o->operand64);
  issued(o, ucp_atomic_op_nbx(p.ep, opcode, buffer, 1, r.base[pe] + offset, r.rkey[pe], &rp));
}

void ucx_network::fence() {
  if (ucs_status_t s = ucp_worker_fence(worker_); s != UCS_OK)
    throw error(errc::system, "ucp_worker_fence", ucs_status_string(s));
}

void ucx_network::flush(int pe, network_done done) {
  if (pe != kNetworkAllPes) {
    check_pe("network::flush", pe);
    const peer& p = peers_[static_cast<std::size_t>(pe)];
    if (p.failed) return finish_now(done, network_status::peer_failed);
    op* o = take_op(op_kind::flush, pe, done);
    ucp_request_param_t rp = request_param(o);
    issued(o, ucp_ep_flush_nbx(p.ep, &rp));
    return;
  }
  op* o = take_op(op_kind::flush, pe, done);
  if (std::none_of(peers_.begin(), peers_.end(), [](const peer& p) { return p.failed; })) {
    ucp_request_param_t rp = request_param(o);
    issued(o, ucp_worker_flush_nbx(worker_, &rp));
    return;
  }
  o->status = network_status::peer_failed;  // some of it cannot have happened
  flush_live_peers(o);
}

// Flushes every endpoint whose peer is alive under one op, which completes when the last one does.
void ucx_network::flush_live_peers(op* o) {
  o->pending = 1;  // our own reference, dropped by the complete() below
  for (peer& p : peers_) {
    if (p.failed || !p.ep) continue;
    ucp_request_param_t rp = request_param(o);
    ucs_status_ptr_t r = ucp_ep_flush_nbx(p.ep, &rp);
    if (r == nullptr) continue;
    if (UCS_PTR_IS_ERR(r)) {
      o->status = network_status::peer_failed;
      continue;
    }
    ++o->pending;
  }
  complete(o, UCS_OK);
}

}  // namespace shoal::detail::ucx
