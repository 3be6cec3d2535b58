// Life cycle of the UCX engine: context and worker, connecting every pair of PEs, capabilities, the
// operation pool and progress(). Messages are in ucx_messages.cpp, one-sided operations in ucx_rma.cpp,
// payload windows in ucx_window.cpp, failed peers and shutdown in ucx_shutdown.cpp.
#include "transport/ucx/ucx_network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "base/config.hpp"
#include "base/log.hpp"
#include "base/run_while_polling.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"

namespace shoal::detail::ucx {
namespace {

[[noreturn]] void fail(const char* call, ucs_status_t status, std::string_view what) {
  throw error(errc::system, call, fmt::format("{}: {}", what, ucs_status_string(status)));
}

void on_ep_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* p = static_cast<peer*>(arg);
  p->net->peer_failed(p->pe, status);
}

void on_hello(void* arg, const void* header, std::size_t header_bytes) {
  static_cast<ucx_network*>(arg)->hello_arrived(header, header_bytes);
}

ucs_status_t hello_cb(void* arg, const void* header, std::size_t header_bytes, void* /*data*/, std::size_t /*bytes*/,
                      const ucp_am_recv_param_t* /*param*/) {
  on_hello(arg, header, header_bytes);
  return UCS_OK;
}

ucs_status_t return_cb(void* arg, const void* header, std::size_t header_bytes, void* /*data*/, std::size_t /*bytes*/,
                       const ucp_am_recv_param_t* /*param*/) {
  static_cast<ucx_network*>(arg)->payload_returned(header, header_bytes);
  return UCS_OK;
}

ucs_status_t message_cb(void* arg, const void* header, std::size_t header_bytes, void* data, std::size_t bytes,
                        const ucp_am_recv_param_t* param) {
  static_cast<ucx_network*>(arg)->message_arrived(header, header_bytes, data, bytes, param);
  // Rendezvous data is being received into our buffer (message_arrived started it), which takes the
  // descriptor over; eager data was copied.
  return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? UCS_INPROGRESS : UCS_OK;
}

void set_handler(ucp_worker_h worker, unsigned id, ucp_am_recv_callback_t cb, void* arg) {
  ucp_am_handler_param_t p{};
  p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_CB |
                 UCP_AM_HANDLER_PARAM_FIELD_ARG;
  p.id = id;
  p.flags = UCP_AM_FLAG_WHOLE_MSG;
  p.cb = cb;
  p.arg = arg;
  if (ucs_status_t s = ucp_worker_set_am_recv_handler(worker, &p); s != UCS_OK)
    fail("ucp_worker_set_am_recv_handler", s, fmt::format("active message id {}", id));
}

// Transport names in ucp_ep_print_info's lane lines, e.g. "tcp/lo" or "posix/memory" give "tcp", "posix".
void collect_transports(ucp_ep_h ep, std::set<std::string>& out) {
  char* text = nullptr;
  std::size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (!f) return;
  ucp_ep_print_info(ep, f);
  std::fclose(f);
  std::string_view all(text, size);
  for (std::size_t at = all.find("lane["); at != std::string_view::npos; at = all.find("lane[", at + 1)) {
    std::string_view line = all.substr(at, all.find('\n', at) - at);
    std::size_t slash = line.find('/');
    if (slash == std::string_view::npos) continue;
    std::size_t start = line.find_last_of(" :", slash) + 1;
    if (start < slash) out.emplace(line.substr(start, slash - start));
  }
  std::free(text);
}

}  // namespace

// --- construction

ucx_network::ucx_network(bootstrap& boot) : boot_(&boot), pe_(boot.pe()), n_pes_(boot.n_pes()) {
  timeout_s_ = process_config().bootstrap_timeout;
  try {
    start(boot);
    connect(boot);
    detect_capabilities();
  } catch (...) {
    shutdown(2.0);  // a peer that never answered must not hold the error up for a whole timeout again
    throw;
  }
}

void ucx_network::start(bootstrap& /*boot*/) {
  // UCX leaves its shared-memory transports (posix, sysv) out of endpoints that handle peer failure
  // unless these are on; they then notice a dead peer by keepalive. Transport settings are read from
  // the environment only (ucp_config_modify does not reach them in UCX 1.13), so set them there, never
  // overriding the user's.
  ::setenv("UCX_POSIX_ERROR_HANDLING", "y", 0);
  ::setenv("UCX_SYSV_ERROR_HANDLING", "y", 0);
  // Keepalive is all that notices a dead peer over shared memory, and UCX's 20 s default outlasts the
  // wait timeouts users set: a PE whose peer died would time out instead of hearing which peer it was.
  // Every 2 s costs a few small messages per peer.
  ::setenv("UCX_KEEPALIVE_INTERVAL", "2s", 0);
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK)
    fail("ucp_config_read", s, "reading UCX_* settings");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 | UCP_FEATURE_AM;
  params.mt_workers_shared = 0;
  ucs_status_t s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (s != UCS_OK) fail("ucp_init", s, "RMA, AMO32, AMO64 and AM features");

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // the proxy thread is the only user
  if (s = ucp_worker_create(context_, &wp, &worker_); s != UCS_OK) fail("ucp_worker_create", s, "single-threaded");

  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  if (s = ucp_worker_query(worker_, &wa); s != UCS_OK) fail("ucp_worker_query", s, "max_am_header");
  max_am_header_ = wa.max_am_header;

  set_handler(worker_, kMessageAm, message_cb, this);
  set_handler(worker_, kHelloAm, hello_cb, this);
  set_handler(worker_, kReturnAm, return_cb, this);
  peers_.resize(static_cast<std::size_t>(n_pes_));
  for (int p = 0; p < n_pes_; ++p) {
    peers_[p].net = this;
    peers_[p].pe = p;
  }
}

// Exchanges worker addresses, creates an endpoint to every PE, then proves each pair works both ways:
// every PE sends a hello to every PE and waits (bounded) for one from each. Endpoint creation alone
// proves nothing, since UCP connects lazily.
void ucx_network::connect(bootstrap& boot) {
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  if (ucs_status_t s = ucp_worker_get_address(worker_, &address, &length); s != UCS_OK)
    fail("ucp_worker_get_address", s, "this PE's worker");
  std::vector<std::uint64_t> lengths(peers_.size());
  const std::uint64_t mine = length;
  std::vector<std::byte> all;
  std::uint64_t widest = 0;
  try {
    boot.all_gather(&mine, lengths.data(), sizeof mine);
    widest = *std::max_element(lengths.begin(), lengths.end());
    std::vector<std::byte> padded(widest);
    std::memcpy(padded.data(), address, length);
    all.resize(widest * peers_.size());
    boot.all_gather(padded.data(), all.data(), widest);
  } catch (...) {
    ucp_worker_release_address(worker_, address);
    throw;
  }
  ucp_worker_release_address(worker_, address);

  for (peer& p : peers_) {
    ucp_ep_params_t ep{};
    ep.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(all.data() + widest * static_cast<std::size_t>(p.pe));
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer fails its operations instead of hanging them
    ep.err_handler.cb = on_ep_error;
    ep.err_handler.arg = &p;
    if (ucs_status_t s = ucp_ep_create(worker_, &ep, &p.ep); s != UCS_OK)
      throw error(errc::peer_failure, "ucp_ep_create",
                  fmt::format("PE {} is unreachable: {}", p.pe, ucs_status_string(s)));
  }

  const std::uint32_t me = static_cast<std::uint32_t>(pe_);
  for (peer& p : peers_) {
    op* o = take_op(op_kind::send, p.pe, {});
    std::memcpy(o->inline_header, &me, sizeof me);
    ucp_request_param_t rp = request_param(o);
    issued(o, ucp_am_send_nbx(p.ep, kHelloAm, o->inline_header, sizeof me, nullptr, 0, &rp));
  }
  auto check_failures = [&] {
    for (const peer& p : peers_)
      if (p.failed)
        throw error(errc::peer_failure, "make_ucx_network",
                    fmt::format("connecting to PE {} failed: {}", p.pe, ucs_status_string(p.failure)));
  };
  const bool all_done = progress_until(now_s() + timeout_s_, [&] {
    check_failures();
    if (ops_in_flight_ != 0) return false;
    return std::all_of(peers_.begin(), peers_.end(), [](const peer& p) { return p.hello_received; });
  });
  check_failures();
  if (!all_done) {
    std::string missing;
    for (const peer& p : peers_)
      if (!p.hello_received) missing += fmt::format("{}PE {}", missing.empty() ? "" : ", ", p.pe);
    throw error(errc::peer_failure, "make_ucx_network",
                fmt::format("no hello within {} s (SHOAL_BOOTSTRAP_TIMEOUT) from {}{}", timeout_s_,
                            missing.empty() ? "nobody, but this PE's own hellos did not complete" : missing, ""));
  }
  completions_.clear();                 // the hellos' (empty) completions
  collective([&] { boot.barrier(); });  // nobody sends a user message before every PE is connected
}

void ucx_network::hello_arrived(const void* header, std::size_t header_bytes) {
  std::uint32_t from = ~0u;
  if (header_bytes == sizeof from) std::memcpy(&from, header, sizeof from);
  if (from < peers_.size()) peers_[from].hello_received = true;
}

void ucx_network::detect_capabilities() {
  caps_.library = fmt::format("UCX {}", ucp_get_version_string());
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(context_, &attr) == UCS_OK)
    caps_.cuda_memory = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  caps_.remote_atomics = true;  // the context was created with AMO32 | AMO64 (ucp_init fails otherwise)
  std::set<std::string> names;
  for (const peer& p : peers_) collect_transports(p.ep, names);
  for (const std::string& n : names) caps_.transports += (caps_.transports.empty() ? "" : ",") + n;
  if (caps_.transports.empty()) {
    const char* tls = std::getenv("UCX_TLS");
    caps_.transports = fmt::format("UCX_TLS={}", tls ? tls : "all");
  }
  SHOAL_LOG_INFO(transport, "UCX network: {}, transports {}, GPU memory {}", caps_.library, caps_.transports,
                 caps_.cuda_memory ? "yes" : "no");
}

// --- handlers, peers

void ucx_network::check_handler(const char* call, unsigned id) const {
  if (id >= kNetworkHandlers)
    throw error(errc::invalid_argument, call, fmt::format("handler id {} (the limit is {})", id, kNetworkHandlers - 1));
}

void ucx_network::on_message(std::uint8_t id, network_handler handler, void* ctx) {
  check_handler("network::on_message", id);
  handlers_[id] = {handler, ctx};
}

void ucx_network::lend_payloads(std::uint8_t id, network_lender lender) {
  check_handler("network::lend_payloads", id);
  lenders_[id] = lender;
}

void ucx_network::peer_failed(int pe, ucs_status_t status) {
  peer& p = peers_[static_cast<std::size_t>(pe)];
  if (p.failed) return;
  p.failed = true;
  p.failure = status;
  p.failed_at = now_s();
  reap_due_ = true;
  SHOAL_LOG_WARN(transport, "UCX endpoint to PE {} failed: {}", pe, ucs_status_string(status));
}

void ucx_network::check_pe(const char* call, int pe) const {
  if (pe < 0 || pe >= n_pes_)
    throw error(errc::invalid_argument, call, fmt::format("PE {} (the job has {} PEs)", pe, n_pes_));
}

// --- the operation pool and completions

op* ucx_network::take_op(op_kind kind, int pe, network_done done) {
  if (!free_ops_) {
    ops_.push_back(std::make_unique<op>());
    ops_.back()->net = this;
    free_ops_ = ops_.back().get();
  }
  op* o = free_ops_;
  free_ops_ = o->next_free;
  o->kind = kind;
  o->in_use = true;
  o->pe = pe;
  o->done = done;
  o->pending = 0;
  o->status = network_status::ok;
  o->fetch = false;
  o->abandoned = false;
  ++ops_in_flight_;
  return o;
}

void ucx_network::release_op(op* o) noexcept {
  o->in_use = false;
  o->done = {};
  o->heap_bytes.clear();
  o->next_free = free_ops_;
  free_ops_ = o;
  --ops_in_flight_;
}

namespace {

network_status to_status(ucs_status_t s) {
  if (s == UCS_OK) return network_status::ok;
  if (s == UCS_ERR_CANCELED) return network_status::canceled;
  return network_status::peer_failed;  // every other failure of a started operation is its endpoint's
}

void request_done(void* request, ucs_status_t status, void* user_data) {
  if (request) ucp_request_free(request);
  auto* o = static_cast<op*>(user_data);
  o->net->complete(o, status);
}

}  // namespace

ucp_request_param_t ucx_network::request_param(op* o) const {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = request_done;
  p.user_data = o;
  return p;
}

void ucx_network::issued(op* o, ucs_status_ptr_t request) {
  if (request == nullptr) {
    complete(o, UCS_OK);
  } else if (UCS_PTR_IS_ERR(request)) {
    complete(o, UCS_PTR_STATUS(request));
  }  // else the callback completes it
}

// A UCX request of `o` finished (or finished at once). Flushes of several endpoints finish on the last.
void ucx_network::complete(op* o, ucs_status_t status) {
  if (o->abandoned) {  // already reported as peer_failed
    if (o->pending > 1) {
      --o->pending;
      return;
    }
    --abandoned_;
    release_op(o);
    return;
  }
  if (status != UCS_OK) {
    if (o->status == network_status::ok) o->status = to_status(status);
    if (o->kind != op_kind::close)
      SHOAL_LOG_DEBUG(transport, "UCX operation to PE {} ended: {}", o->pe, ucs_status_string(status));
    // A message that did not go out leaves a gap in the pair's sequence: the receiver holds every later
    // message for it, for good. So the pair is over, as if the endpoint had failed; a send by reference also
    // waits for its payload's return, which cannot come, and the reaper ends it as peer_failed.
    if (o->kind == op_kind::send && o->pe >= 0 && status != UCS_ERR_CANCELED) peer_failed(o->pe, status);
  }
  if (o->pending > 1) {
    --o->pending;
    return;
  }
  std::uint64_t value = 0;
  if (o->kind == op_kind::atomic && o->fetch && o->status == network_status::ok)
    value = o->width == 4 ? o->reply32 : o->reply64;
  if (o->done.fn) completions_.push_back({o->done, o->status, value});
  release_op(o);
}

void ucx_network::finish_now(network_done done, network_status status, std::uint64_t value) {
  if (done.fn) completions_.push_back({done, status, value});
}

// --- progress

void ucx_network::collective(const std::function<void()>& fn) {
  run_while_polling(fn, [this] { return ucp_worker_progress(worker_) != 0; });
}

bool ucx_network::progress() {
  bool any = false;
  for (int i = 0; i < 16 && ucp_worker_progress(worker_) != 0; ++i) any = true;
  if (reap_due_) reap_failed_peers(kFailedPeerGrace);
  // Only what is due now: completions and handlers may issue more, which waits for the next call. Each
  // is popped before it runs, so one that throws leaves the rest queued.
  for (std::size_t n = completions_.size(); n > 0 && !completions_.empty(); --n) {
    completion c = completions_.front();
    completions_.pop_front();
    any = true;
    c.done(c.status, c.value);
  }
  for (std::size_t n = ready_.size(); n > 0 && !ready_.empty(); --n) {
    inbound* m = ready_.front();
    ready_.pop_front();
    any = true;
    deliver(m);
  }
  return any;
}

}  // namespace shoal::detail::ucx
