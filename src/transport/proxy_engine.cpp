// The proxy thread's loop and the initiator side: ring requests become messages to their targets, and
// complete when the targets' replies are in. proxy_engine_serve.cpp handles what arrives.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/log.hpp"
#include "transport/proxy_engine_core.hpp"

namespace shoal::detail {

namespace {

// Idle back-off of the proxy thread: spin this many empty passes, then yield for as many more, then sleep
// briefly between passes. A request that arrives while the thread sleeps waits at most kIdleSleep.
constexpr unsigned kIdleSpins = 64;
constexpr unsigned kIdleYields = 1024;
constexpr auto kIdleSleep = std::chrono::microseconds(50);

std::uint64_t chunks(std::uint64_t bytes, std::uint64_t chunk) { return (bytes + chunk - 1) / chunk; }

}  // namespace

proxy_engine_core::proxy_engine_core(const proxy_ring_view& ring, network& net, local_memory& memory,
                                     const proxy_limits& limits, const proxy_engine_options& options)
    : consumer_(ring),
      net_(net),
      memory_(memory),
      limits_(limits),
      heap_mapped_(limits.heap_bytes),
      options_(options),
      pe_(net.pe()),
      link_(std::make_shared<proxy_engine_link>(proxy_engine_link{this})),
      requests_(ring.window),
      peers_(static_cast<std::size_t>(std::max(net.n_pes(), 0))) {
  const char* call = "proxy_engine";
  if (limits.n_pes != net.n_pes())
    throw error(errc::invalid_argument, call,
                fmt::format("limits.n_pes {} but the network has {} PEs", limits.n_pes, net.n_pes()));
  if (limits.heap_bytes != memory.heap_bytes())
    throw error(errc::invalid_argument, call,
                fmt::format("limits.heap_bytes {} but the local heap has {}", limits.heap_bytes, memory.heap_bytes()));
  if (limits.completion_slots > ring.result_slots)
    throw error(errc::invalid_argument, call,
                fmt::format("limits.completion_slots {} but the ring has {} result slots", limits.completion_slots,
                            ring.result_slots));
  if (options.chunk_bytes == 0 || options.poll_batch == 0)
    throw error(errc::invalid_argument, call, "chunk_bytes and poll_batch must be positive");
  net_.on_message(kProxyRequestHandler, &on_request_message, this);
  net_.on_message(kProxyReplyHandler, &on_reply_message, this);
  const network_lender lender{.lend = &lend, .give_back = &give_back, .ctx = this, .min_bytes = options.lend_min_bytes};
  net_.lend_payloads(kProxyRequestHandler, lender);
  net_.lend_payloads(kProxyReplyHandler, lender);
}

std::byte* proxy_engine_core::lend(void* ctx, std::size_t bytes) {
  return static_cast<proxy_engine_core*>(ctx)->memory_.lend(bytes);
}

void proxy_engine_core::give_back(void* ctx, std::byte* buffer) {
  static_cast<proxy_engine_core*>(ctx)->memory_.give_back(buffer);
}

void proxy_engine_core::run(const std::atomic<bool>& stop_requested) {
  unsigned idle = 0;
  while (!stop_requested.load(std::memory_order_acquire)) {
    bool busy = false;
    try {
      now_ = proxy_clock::now();
      pass_began_.store(now_.time_since_epoch().count(), std::memory_order_relaxed);
      enter("taking requests from its ring");
      busy |= consume();
      enter("sending requests");
      busy |= pump();
      enter("in the network (receiving, and serving peers' requests)");
      busy |= net_.progress();
      probe();
      enter("flushing its copies");
      busy |= settle();
      enter(nullptr);
    } catch (const error& e) {
      // A throwing network or memory leaves the engine's state unknown: record it and end the thread.
      leave_failed();
      fail(e.category(), -1, std::nullopt, e.what());
      return;
    } catch (const std::exception& e) {
      leave_failed();
      fail(errc::internal, -1, std::nullopt, e.what());
      return;
    }
    if (busy) {
      idle = 0;
    } else if (++idle > kIdleSpins + kIdleYields) {
      std::this_thread::sleep_for(kIdleSleep);
    } else if (idle > kIdleSpins) {
      std::this_thread::yield();
    }
  }
}

// The thread ends on a failure: it is in no step, and a flush it left outstanding will never be settled, so
// the watchdog must not blame the CUDA stream for it (the failure itself is what gets reported).
void proxy_engine_core::leave_failed() noexcept {
  enter(nullptr);
  flush_began_.store(0, std::memory_order_relaxed);
}

std::optional<proxy_stall> proxy_engine_core::stall(proxy_clock::time_point now,
                                                    std::chrono::milliseconds at_least) const {
  auto since = [&](proxy_clock::rep began) { return now - proxy_clock::time_point(proxy_clock::duration(began)); };
  if (const char* step = step_.load(std::memory_order_acquire); step != nullptr) {
    const proxy_clock::duration ran = since(pass_began_.load(std::memory_order_relaxed));
    if (ran >= at_least) return proxy_stall{.seconds = std::chrono::duration<double>(ran).count(), .step = step};
  }
  const proxy_clock::rep flush_began = flush_began_.load(std::memory_order_relaxed);
  if (flush_began == 0) return std::nullopt;
  const proxy_clock::duration waited = since(flush_began);
  if (waited < at_least) return std::nullopt;
  return proxy_stall{.seconds = std::chrono::duration<double>(waited).count(),
                     .step = "waiting for a flush of its copies to complete",
                     .flush = true};
}

void proxy_engine_core::fail(errc category, int pe, std::optional<std::uint64_t> request, const std::string& detail) {
  {
    std::lock_guard lock(failure_mutex_);
    if (!failure_) {
      std::string what = detail;
      if (request) what += fmt::format(" (request {})", *request);
      failure_.emplace(category, fmt::format("proxy engine of PE {}", pe_), what);
      // Said now: the PE's next call reports it too, but a PE that only serves its peers may make none.
      // What was in flight tells a stall (a kernel that timed out waiting for the proxy) from a fault.
      SHOAL_LOG_ERROR(proxy, "{}", failure_->what());
      SHOAL_LOG_ERROR(proxy, "in flight at the failure: {}", in_flight());
    }
  }
  if (pe >= 0 && static_cast<std::size_t>(pe) < peers_.size() && category == errc::peer_failure) {
    peers_[pe].dead = true;
    peers_[pe].queue.clear();
  }
  failed_.store(true, std::memory_order_release);
  consumer_.stop();  // producers waiting on the ring return consumer_stopped and then call check()
}

namespace {
const char* op_name(proxy_op op) {
  switch (op) {
    case proxy_op::put:
      return "put";
    case proxy_op::get:
      return "get";
    case proxy_op::put_signal:
      return "put_signal";
    case proxy_op::signal:
      return "signal";
    case proxy_op::atomic:
      return "atomic";
    case proxy_op::fence:
      return "fence";
    case proxy_op::quiet:
      return "quiet";
  }
  return "?";
}

// The heap ranges a request names, for an error about them: "remote [a, b), local [c, d), signal at e".
std::string heap_ranges(const proxy_request& r) {
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (proxy_codec::uses_data(r.op)) {
    add(fmt::format("remote [{}, {})", r.remote_offset, r.remote_offset + r.size));
    if (!r.local_is_address && !r.local_is_inline) add(fmt::format("local [{}, {})", r.local, r.local + r.size));
  }
  if (r.op == proxy_op::atomic) add(fmt::format("word at {}", r.remote_offset));
  if (proxy_codec::uses_signal(r.op)) add(fmt::format("signal at {}", r.signal_offset));
  return out;
}
}  // namespace

bool proxy_engine_core::awaits_flush(std::uint64_t sequence) const {
  auto in = [&](const std::vector<std::uint64_t>& v) { return std::find(v.begin(), v.end(), sequence) != v.end(); };
  return in(finished_) ||
         std::any_of(flushing_.begin(), flushing_.end(), [&](const proxy_batch& b) { return in(b.finished); });
}

std::string proxy_engine_core::in_flight() const {
  auto seconds_since = [](proxy_clock::time_point t) {
    return std::chrono::duration<double>(proxy_clock::now() - t).count();
  };
  const std::uint64_t oldest = consumer_.completed();
  std::string s = fmt::format("requests consumed and not complete: {}", consumer_.consumed() - oldest);
  if (oldest != consumer_.consumed()) {
    const proxy_pending& p = requests_[oldest & (requests_.size() - 1)];
    if (p.active && p.request.sequence == oldest)
      s += fmt::format(" (the oldest, request {}: {} to PE {}, {} bytes, {} of {} replies in)", oldest,
                       op_name(p.request.op), p.request.pe, p.request.size, p.replies, p.replies_expected);
    else if (!quiets_.empty() && quiets_.front() == oldest)
      s += fmt::format(" (the oldest, request {}, is a quiet)", oldest);
    else if (awaits_flush(oldest))
      s += fmt::format(" (the oldest, request {}, waits for a flush)", oldest);
    else
      s += fmt::format(" (the oldest, request {}, was not carried out)", oldest);
  }
  for (std::size_t pe = 0; pe < peers_.size(); ++pe) {
    const proxy_peer& peer = peers_[pe];
    if (peer.queue.empty() && peer.awaiting == 0) continue;
    s += fmt::format("; PE {}: {} sends queued, {} bytes in flight, {} replies owed, last heard {:.1f} s ago{}", pe,
                     peer.queue.size(), peer.window_bytes, peer.awaiting, seconds_since(peer.last_heard),
                     peer.dead ? " (dead)" : "");
  }
  if (!flushing_.empty())
    s += fmt::format("; {} flushes outstanding, the oldest begun {:.1f} s ago", flushing_.size(),
                     seconds_since(flushing_.front().began));
  return s;
}

void proxy_engine_core::check() const {
  std::lock_guard lock(failure_mutex_);
  if (failure_) throw *failure_;
}

proxy_engine_counters proxy_engine_core::counters() const noexcept {
  return {n_requests_.load(std::memory_order_relaxed), n_sent_.load(std::memory_order_relaxed),
          n_chunks_.load(std::memory_order_relaxed),   n_served_.load(std::memory_order_relaxed),
          n_pings_.load(std::memory_order_relaxed),    n_borrowed_.load(std::memory_order_relaxed)};
}

void proxy_engine_core::detach() {
  link_->core = nullptr;
  // Messages that still arrive (while the network is shut down) have no engine to go to.
  auto drop = [](void*, const network_message&) {};
  net_.on_message(kProxyRequestHandler, drop, nullptr);
  net_.on_message(kProxyReplyHandler, drop, nullptr);
  net_.lend_payloads(kProxyRequestHandler, {});
  net_.lend_payloads(kProxyReplyHandler, {});
}

// ---- the ring ----

bool proxy_engine_core::consume() {
  bool any = false;
  for (std::uint32_t i = 0; i < options_.poll_batch && !failed(); ++i) {
    const std::optional<proxy_descriptor> d = consumer_.poll();
    if (!d) break;
    any = true;
    count(n_requests_);
    const proxy_limits mapped = mapped_limits();
    const proxy_decoded decoded = decode(*d, mapped);
    if (decoded.status != proxy_status::ok) {
      const std::uint64_t seq = d->words[proxy_descriptor::kSequenceWord];
      const proxy_request& r = decoded.request;
      if (decode(*d, limits_).status == proxy_status::ok) {
        // Within the heap's reservation but not its mapped part: an address past the end of the symmetric
        // objects, which the device could not tell from a live one (its handle may predate a growth).
        fail(errc::invalid_argument, r.pe, seq,
             fmt::format("{} to PE {} names heap bytes beyond the {} mapped ({}): an address past the end of "
                         "every symmetric object",
                         op_name(r.op), r.pe, mapped.heap_bytes, heap_ranges(r)));
      } else {
        // A bug or corruption on this PE's side of the ring: nothing after it can be trusted.
        fail(errc::internal, -1, seq, fmt::format("a ring descriptor does not decode: {}", to_string(decoded.status)));
      }
      break;
    }
    dispatch(decoded.request);
  }
  return any;
}

// Per-pair FIFO order is the whole ordering story: each peer's send items are queued in ticket order and
// sent in that order, the network delivers one PE's messages to another in order, and the target applies
// them in arrival order through one local_memory stream. So a fence needs no action (everything after it
// to the same peer is already applied after everything before it), and a put_signal's signal, queued
// behind its data, is applied after the data.
void proxy_engine_core::dispatch(const proxy_request& r) {
  const std::uint64_t seq = r.sequence;
  if (r.op == proxy_op::fence) {
    finished_.push_back(seq);
    return;
  }
  if (r.op == proxy_op::quiet) {
    // Completes once every earlier request has (settle()). A request completes only when its target has
    // replied, and a target replies only after applying and flushing, so then every earlier request is
    // remotely complete. The ring's watermark cannot pass an incomplete request either, so a producer's
    // proxy_wait_complete_before(q + 1) is exact on its own; completing q late also makes
    // proxy_wait_complete(q) mean the same. Per-peer quiets wait for all peers: stronger, never wrong.
    quiets_.push_back(seq);
    return;
  }
  SHOAL_LOG_TRACE(proxy, "request {}: op {} to PE {}, {} bytes", seq, int(r.op), r.pe, r.size);
  proxy_pending& p = requests_[seq & (requests_.size() - 1)];
  if (p.active) {
    fail(errc::internal, -1, seq, "two outstanding requests share a window slot");
    return;
  }
  const bool data = r.op == proxy_op::put || r.op == proxy_op::get || r.op == proxy_op::put_signal;
  const bool signal = r.op == proxy_op::put_signal || r.op == proxy_op::signal;
  p = proxy_pending{.active = true, .request = r};
  p.replies_expected = (data ? chunks(r.size, options_.chunk_bytes) : 0) + (signal || r.op == proxy_op::atomic);
  if (p.replies_expected == 0) {  // an empty put or get: nothing to do
    finish(seq);
    return;
  }
  proxy_peer& peer = peers_[r.pe];
  if (peer.queue.empty()) ready_.push_back(r.pe);
  if (data && r.size != 0)
    peer.queue.push_back(
        {seq, r.op == proxy_op::get ? proxy_wire_kind::get_request : proxy_wire_kind::put_data, 0, r.size});
  if (signal) peer.queue.push_back({seq, proxy_wire_kind::signal});
  if (r.op == proxy_op::atomic) peer.queue.push_back({seq, proxy_wire_kind::atomic});
}

// ---- sending ----

proxy_outgoing* proxy_engine_core::stage(int pe, std::uint8_t handler, const proxy_wire_header& h,
                                         std::size_t payload_bytes) {
  auto out = std::make_unique<proxy_outgoing>();
  out->link = link_;
  out->pe = pe;
  out->handler = handler;
  out->header = h;
  if (payload_bytes >= options_.lend_min_bytes && (out->payload = memory_.lend(payload_bytes)) != nullptr)
    out->lender = &memory_;
  else if (payload_bytes != 0)
    out->payload = new std::byte[payload_bytes];
  out->payload_bytes = payload_bytes;
  staged_.push_back(std::move(out));
  return staged_.back().get();
}

bool proxy_engine_core::pump() {
  bool any = false;
  for (std::size_t i = 0; i < ready_.size();) {
    const int pe = ready_[i];
    proxy_peer& peer = peers_[pe];
    while (!peer.queue.empty()) {
      proxy_send_item& item = peer.queue.front();
      const proxy_request& r = requests_[item.sequence & (requests_.size() - 1)].request;
      proxy_wire_header h{.kind = item.kind, .request = item.sequence};
      std::uint64_t n = 0;
      if (item.kind == proxy_wire_kind::put_data || item.kind == proxy_wire_kind::get_request) {
        n = std::min(options_.chunk_bytes, item.end - item.next);
        if (peer.window_bytes != 0 && peer.window_bytes + n > options_.peer_window_bytes) break;
        h.chunk_offset = item.next;
        h.offset = r.remote_offset + item.next;
        h.bytes = n;
      } else if (item.kind == proxy_wire_kind::signal) {
        h.chunk_offset = r.size;  // after the data, for a put_signal
        h.signal_op = r.signal_op;
        h.signal_offset = r.signal_offset;
        h.value = r.value;
      } else {
        h.atomic_op = r.atomic_op;
        h.atomic_type = r.atomic_type;
        h.offset = r.remote_offset;
        h.value = r.value;
        h.compare = r.compare;
      }
      const bool put = item.kind == proxy_wire_kind::put_data;
      proxy_outgoing* out = stage(pe, kProxyRequestHandler, h, put ? n : 0);
      if (put && r.local_is_inline)  // the data came in the descriptor: this chunk's bytes of its r.size <= 8
        std::memcpy(out->payload, reinterpret_cast<const std::byte*>(&r.local) + item.next, n);
      else if (put)
        memory_.read(local_ref{r.local + item.next, r.local_is_address, r.local_is_host}, out->payload, n);
      if (n != 0) count(n_chunks_);
      peer.window_bytes += n;
      if (peer.awaiting++ == 0) peer.last_heard = now_;
      ++awaiting_;
      any = true;
      item.next += n;
      if (item.next >= item.end) peer.queue.pop_front();
    }
    if (peer.queue.empty()) {
      ready_[i] = ready_.back();
      ready_.pop_back();
    } else {
      ++i;
    }
  }
  return any;
}

void proxy_engine_core::finish(std::uint64_t sequence) { finished_.push_back(sequence); }

// The batch's flush begins now and the loop goes on: copies of this batch overlap the network work of the
// next passes. Batches are released in order, so messages to a peer still leave in ticket order.
bool proxy_engine_core::settle() {
  const bool any = !staged_.empty() || !finished_.empty() || !held_lent_.empty() || !held_borrowed_.empty();
  if (any) {
    proxy_batch& b = flushing_.emplace_back();
    b.ticket = memory_.flush_begin();
    b.began = now_;
    SHOAL_LOG_TRACE(proxy, "flush {} begun: {} messages, {} requests finished", b.ticket, staged_.size(),
                    finished_.size());
    b.staged.swap(staged_);
    b.finished.swap(finished_);
    b.lent.swap(held_lent_);
    b.borrowed.swap(held_borrowed_);
  }
  while (!flushing_.empty() && memory_.flushed(flushing_.front().ticket)) {
    release(flushing_.front());
    flushing_.pop_front();
  }
  flush_began_.store(flushing_.empty() ? 0 : flushing_.front().began.time_since_epoch().count(),
                     std::memory_order_relaxed);
  bool quiets = false;
  while (!quiets_.empty() && consumer_.completed() == quiets_.front()) {
    const proxy_status s = consumer_.complete(quiets_.front());
    if (s != proxy_status::ok)
      fail(errc::internal, -1, quiets_.front(), fmt::format("ring completion: {}", to_string(s)));
    quiets_.pop_front();
    quiets = true;
  }
  return any || quiets || !flushing_.empty();
}

// After the batch's flush: put data read for our messages, peers' puts, gets and atomics applied here and
// get data written for our own gets are all complete (local_memory's contract), so lent payloads that
// arrived go back (borrowed ones to their senders), replies and requests go out, and finished requests complete.
void proxy_engine_core::release(proxy_batch& batch) {
  for (std::byte* buffer : batch.lent) memory_.give_back(buffer);
  for (const proxy_borrowed& b : batch.borrowed) net_.return_borrowed(b.from, b.token);
  for (std::unique_ptr<proxy_outgoing>& out : batch.staged) {
    if (peers_[out->pe].dead) continue;
    const std::span<const std::byte> payload(out->payload, out->payload_bytes);
    proxy_outgoing* raw = out.release();
    SHOAL_LOG_TRACE(proxy, "sending kind {} of request {} to PE {}", int(raw->header.kind), raw->header.request,
                    raw->pe);
    count(n_sent_);
    // The network owns the message until on_sent, which deletes it.
    net_.send(raw->pe, raw->handler, proxy_wire_bytes(raw->header), payload, network_done{&on_sent, raw});
  }
  for (const std::uint64_t seq : batch.finished) {
    SHOAL_LOG_TRACE(proxy, "request {} complete", seq);
    proxy_pending& p = requests_[seq & (requests_.size() - 1)];
    proxy_status s;
    if (p.active && p.request.sequence == seq && p.request.op == proxy_op::atomic &&
        proxy_atomic_fetches(p.request.atomic_op)) {
      s = consumer_.complete(seq, p.request.completion, p.old_value);
    } else {
      s = consumer_.complete(seq);
    }
    if (p.active && p.request.sequence == seq) p.active = false;
    if (s != proxy_status::ok) fail(errc::internal, -1, seq, fmt::format("ring completion: {}", to_string(s)));
  }
}

// A peer that replies is alive; one that has owed us replies for a while gets a ping, so that if it died
// the network fails the ping (peer_failed) and the engine reports it instead of waiting forever.
void proxy_engine_core::probe() {
  if (awaiting_ == 0 || now_ < next_probe_) return;
  next_probe_ = now_ + options_.probe_interval / 2;
  for (std::size_t pe = 0; pe < peers_.size(); ++pe) {
    proxy_peer& peer = peers_[pe];
    if (peer.awaiting == 0 || peer.dead || now_ - peer.last_heard < options_.probe_interval) continue;
    peer.last_heard = now_;
    stage(static_cast<int>(pe), kProxyRequestHandler, proxy_wire_header{.kind = proxy_wire_kind::ping}, 0);
    count(n_pings_);
  }
}

// ---- proxy_engine ----

proxy_engine::proxy_engine(const proxy_ring_view& ring, network& net, local_memory& memory, const proxy_limits& limits,
                           const proxy_engine_options& options)
    : core_(std::make_unique<proxy_engine_core>(ring, net, memory, limits, options)),
      stall_warning_(options.stall_warning) {}

proxy_engine::~proxy_engine() {
  halt();
  core_->detach();
}

void proxy_engine::start() {
  if (started_) throw error(errc::invalid_argument, "proxy_engine::start", "already started");
  started_ = true;
  thread_ = std::thread([this] { core_->run(stop_requested_); });
  if (stall_warning_.count() > 0) watchdog_ = std::thread([this] { watch(); });
}

void proxy_engine::halt() noexcept {
  {
    std::lock_guard lock(watch_mutex_);
    stop_requested_.store(true, std::memory_order_release);
  }
  watch_wakeup_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (thread_.joinable()) thread_.join();
  core_->stop_ring();  // the thread is gone: the ring's consumer is ours now
}

// Looks at the proxy a few times per stall_warning and warns once per stall (a pass of its thread, or a
// flush) that outlasts it.
void proxy_engine::watch() {
  const auto period = std::clamp(stall_warning_ / 4, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
  std::unique_lock lock(watch_mutex_);
  double reported = 0;  // the stall already warned about: its length when it was seen
  while (!watch_wakeup_.wait_for(lock, period, [this] { return stop_requested_.load(std::memory_order_acquire); })) {
    const std::optional<proxy_stall> s = stall(stall_warning_);
    if (!s) {
      reported = 0;
      continue;
    }
    if (reported != 0 && s->seconds >= reported) continue;  // the same stall, warned about already
    reported = s->seconds;
    if (s->flush) {
      SHOAL_LOG_WARN(proxy,
                     "the proxy's CUDA stream has not finished copies it was given {:.1f} s ago, and every request of "
                     "this PE that needs them waits. Two known causes, while a kernel waits on the proxy: waiting "
                     "work at the head of every hardware work queue of the process, so the proxy's stream cannot "
                     "start (too few queues: CUDA_DEVICE_MAX_CONNECTIONS, 2 under MPS), or the PE's kernels holding "
                     "every SM, so the proxy's one-thread atomic and signal kernels cannot start. See "
                     "docs/proxy-design.md, \"Hardware work queues\"",
                     s->seconds);
    } else {
      SHOAL_LOG_WARN(proxy,
                     "the proxy thread has been {} for {:.1f} s: a CUDA or network call is not returning, and every "
                     "request of this PE waits for it. Two known causes, while a kernel waits on the proxy: another "
                     "thread of this process waiting in a synchronous CUDA call (a copy to or from pageable memory), "
                     "or waiting work at the head of every hardware work queue of the process, so the proxy's "
                     "stream cannot start (too few queues: CUDA_DEVICE_MAX_CONNECTIONS, 2 under MPS). See "
                     "docs/proxy-design.md, \"Blocking CUDA calls beside a kernel that waits on the proxy\" and "
                     "\"Hardware work queues\"",
                     s->step, s->seconds);
    }
  }
}

std::optional<proxy_stall> proxy_engine::stall(std::chrono::milliseconds at_least) const {
  return core_->stall(proxy_clock::now(), at_least);
}

void proxy_engine::stop() {
  halt();
  check();
}

void proxy_engine::check() const { core_->check(); }
bool proxy_engine::failed() const noexcept { return core_->failed(); }
void proxy_engine::heap_mapped(std::uint64_t bytes) noexcept { core_->heap_mapped(bytes); }
proxy_engine_counters proxy_engine::counters() const noexcept { return core_->counters(); }

}  // namespace shoal::detail
