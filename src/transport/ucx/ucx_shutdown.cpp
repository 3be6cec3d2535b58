// The UCX engine when things end: operations to a failed peer that UCX never ends, and shutdown.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "base/log.hpp"
#include "transport/ucx/ucx_network.hpp"

namespace shoal::detail::ucx {

// UCX 1.13 does not end every request to a failed peer: over shared memory, gets and atomics (emulated
// with active messages) wait for replies that never come. Whatever is still out `grace_s` after its peer
// failed is reported as peer_failed here and left to UCX, which may still end it (or not) later.
void ucx_network::reap_failed_peers(double grace_s) {
  const double now = now_s();
  double first_failure = -1;
  for (const peer& p : peers_)
    if (p.failed && (first_failure < 0 || p.failed_at < first_failure)) first_failure = p.failed_at;
  if (first_failure < 0) return;
  bool waiting = false;
  for (auto& o : ops_) {
    if (!o->in_use || o->abandoned || o->kind == op_kind::close) continue;
    double failed_at = o->pe == kNetworkAllPes ? first_failure : -1;
    if (o->pe >= 0 && peers_[static_cast<std::size_t>(o->pe)].failed)
      failed_at = peers_[static_cast<std::size_t>(o->pe)].failed_at;
    if (failed_at < 0) continue;
    if (now < failed_at + grace_s) {
      waiting = true;
      continue;
    }
    if (o->done.fn) completions_.push_back({o->done, network_status::peer_failed, 0});
    o->done = {};
    o->abandoned = true;
    ++abandoned_;
  }
  reap_due_ = waiting;
}

// --- shutdown

ucx_network::~ucx_network() { shutdown(timeout_s_); }

// Flush (bounded), drop rkeys, close endpoints (forcibly to failed peers), unmap, and run the completion
// of everything still outstanding, with the status UCX gave it or `canceled`. Never throws.
void ucx_network::shutdown(double budget_s) noexcept {
  if (worker_) {
    const double deadline = now_s() + budget_s;
    // Everything issued completes (or fails) before its rkeys and endpoints go.
    flush_live_peers(take_op(op_kind::flush, kNetworkAllPes, {}));
    if (!progress_until(deadline, [&] {
          if (reap_due_) reap_failed_peers(kFailedPeerGrace);
          return ops_in_flight_ == abandoned_;
        })) {
      int by_kind[6] = {};
      for (const auto& o : ops_)
        if (o->in_use) ++by_kind[static_cast<int>(o->kind)];
      SHOAL_LOG_WARN(
          transport,
          "UCX: after {} s at shutdown still outstanding: {} sends, {} puts, {} gets, {} atomics, {} flushes", budget_s,
          by_kind[0], by_kind[1], by_kind[2], by_kind[3], by_kind[4]);
    }
    for (region_state& r : regions_)
      for (ucp_rkey_h& k : r.rkey)
        if (k) ucp_rkey_destroy(std::exchange(k, nullptr));
    close_payload_window();

    for (peer& p : peers_) {
      if (!p.ep) continue;
      op* o = take_op(op_kind::close, p.pe, {});
      ucp_request_param_t rp = request_param(o);
      rp.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
      rp.flags = p.failed ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      ucs_status_ptr_t r = ucp_ep_close_nbx(p.ep, &rp);
      p.ep = nullptr;
      if (r == nullptr || UCS_PTR_IS_ERR(r)) release_op(o);
    }
    if (!progress_until(deadline, [&] {
          return std::none_of(ops_.begin(), ops_.end(),
                              [](const auto& o) { return o->in_use && o->kind == op_kind::close; });
        }))
      SHOAL_LOG_WARN(transport, "UCX: endpoints still closing after {} s; destroying the worker anyway", budget_s);
    for (region_state& r : regions_)
      if (r.memh) ucp_mem_unmap(context_, std::exchange(r.memh, nullptr));
  }
  // Whatever UCX never called back is canceled; then every due completion runs, once.
  for (auto& o : ops_)
    if (o->in_use && !o->abandoned && o->kind != op_kind::close) {
      if (o->done.fn) completions_.push_back({o->done, network_status::canceled, 0});
      o->done = {};
      o->abandoned = true;  // should ucp_worker_destroy still call back, the op is only released
      ++abandoned_;
    }
  while (!completions_.empty()) {
    completion c = completions_.front();
    completions_.pop_front();
    try {
      c.done(c.status, c.value);
    } catch (...) {
      SHOAL_LOG_ERROR(transport, "a network completion threw during shutdown; ignored");
    }
  }
  if (worker_) ucp_worker_destroy(std::exchange(worker_, nullptr));
  if (context_) ucp_cleanup(std::exchange(context_, nullptr));
}
}  // namespace shoal::detail::ucx
