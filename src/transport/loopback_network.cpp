#include "transport/loopback_network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <span>
#include <vector>

#include "shoal/error.hpp"

namespace shoal::detail {

namespace {

constexpr auto kExposeTimeout = std::chrono::seconds(30);

struct loopback_message {
  int from = -1;
  std::uint8_t handler = 0;
  std::vector<std::byte> header;
  std::vector<std::byte> payload;
  std::span<const std::byte> by_reference;  // a payload left in the sender's window (then `payload` is empty)
  std::uint64_t token = 0;                  // ... and the token the receiver returns it with
};

struct loopback_endpoint {
  std::mutex mutex;
  std::deque<loopback_message> inbox;  // one queue per destination: each sender's messages stay in order
  std::deque<std::uint64_t> returned;  // tokens of this PE's borrowed payloads, given back
  std::atomic<bool> dead{false};
  bool connected = false;  // under the fabric's mutex
};

// A PE's payload window (open_payload_window): its memory, and which peers' windows it kept a view of.
struct loopback_window {
  std::vector<std::byte> memory;
  bool opened = false;
  bool decided = false;     // `views` is final
  std::vector<bool> views;  // [peer]: this PE reads peer's window in place
};

struct exposed_range {
  std::byte* base = nullptr;
  std::size_t bytes = 0;
  bool live = false;
};

struct pending_completion {
  network_done done;
  network_status status = network_status::ok;
  std::uint64_t value = 0;
};

}  // namespace

struct loopback_fabric::state {
  int n_pes = 0;
  loopback_options options;
  std::vector<std::unique_ptr<loopback_endpoint>> pes;
  std::mutex mutex;  // connected flags and regions
  std::condition_variable regions_changed;
  std::vector<std::vector<exposed_range>> regions;  // [pe][region id]
  std::vector<loopback_window> windows;             // [pe], under the mutex

  bool dead(int pe) const { return pes[pe]->dead.load(std::memory_order_acquire); }
};

namespace {

class loopback_network final : public network {
 public:
  loopback_network(std::shared_ptr<loopback_fabric::state> fabric, int pe)
      : fabric_(std::move(fabric)), pe_(pe), rng_(fabric_->options.seed * 1000003u + static_cast<unsigned>(pe)) {
    capabilities_.library = "loopback";
    capabilities_.transports = "in-process";
    capabilities_.cuda_memory = false;
    capabilities_.remote_atomics = true;
  }

  // Operations not yet reported run now: those that completed with their status, the rest as canceled.
  ~loopback_network() override {
    for (auto* list : {&ready_, &held_}) {
      for (const pending_completion& c : *list) c.done(c.status, c.value);
      list->clear();
    }
    for (const pending_completion& c : limbo_) c.done(network_status::canceled, 0);
    for (const lent_payload& l : lent_out_) l.done(network_status::canceled, 0);
  }

  int pe() const noexcept override { return pe_; }
  int n_pes() const noexcept override { return fabric_->n_pes; }
  const network_capabilities& capabilities() const noexcept override { return capabilities_; }

  void on_message(std::uint8_t id, network_handler handler, void* ctx) override {
    check_handler(id, "loopback_network::on_message");
    handlers_[id] = {handler, ctx};
  }

  void lend_payloads(std::uint8_t id, network_lender lender) override {
    check_handler(id, "loopback_network::lend_payloads");
    lenders_[id] = lender;
  }

  network_region expose(void* base, std::size_t bytes, memory_kind kind) override {
    if (kind != memory_kind::host)
      throw error(errc::unsupported, "loopback_network::expose", "the loopback network reaches host memory only");
    std::unique_lock lock(fabric_->mutex);
    auto& mine = fabric_->regions[pe_];
    mine.push_back({static_cast<std::byte*>(base), bytes, true});
    const std::size_t id = mine.size() - 1;
    fabric_->regions_changed.notify_all();
    // Collective: every live PE must have made its id-th call.
    const bool all = fabric_->regions_changed.wait_for(lock, kExposeTimeout, [&] {
      for (int p = 0; p < fabric_->n_pes; ++p)
        if (!fabric_->dead(p) && fabric_->regions[p].size() <= id) return false;
      return true;
    });
    if (!all) throw error(errc::timeout, "loopback_network::expose", "not every PE exposed its region in time");
    return {static_cast<std::uint32_t>(id)};
  }

  void withdraw(network_region region) override {
    std::lock_guard lock(fabric_->mutex);
    auto& mine = fabric_->regions[pe_];
    if (region.id < mine.size()) mine[region.id].live = false;
  }

  void send(int pe, std::uint8_t handler, std::span<const std::byte> header, std::span<const std::byte> payload,
            network_done done) override {
    check_pe(pe, "loopback_network::send");
    check_handler(handler, "loopback_network::send");
    if (self_dead()) return limbo_.push_back({done});
    if (fabric_->dead(pe)) return complete(done, network_status::peer_failed);
    loopback_message m{pe_, handler, {header.begin(), header.end()}, {}};
    const bool by_reference = pe != pe_ && lies_within(payload, window_) && viewed_by(pe);
    if (by_reference) {
      m.by_reference = payload;
      m.token = next_token_++;
      lent_out_.push_back({m.token, pe, done});
    } else {
      m.payload.assign(payload.begin(), payload.end());
    }
    {
      loopback_endpoint& target = *fabric_->pes[pe];
      std::lock_guard lock(target.mutex);
      target.inbox.push_back(std::move(m));
    }
    if (!by_reference) complete(done, network_status::ok);
  }

  std::span<std::byte> open_payload_window(std::size_t bytes, payload_view_check usable) override {
    const char* call = "loopback_network::open_payload_window";
    std::unique_lock lock(fabric_->mutex);
    loopback_window& mine = fabric_->windows[pe_];
    if (mine.opened) throw error(errc::invalid_argument, call, "opened twice");
    mine.memory.resize(bytes);
    mine.opened = true;
    mine.views.assign(fabric_->n_pes, false);
    fabric_->regions_changed.notify_all();
    wait_for_all(lock, call, [](const loopback_window& w) { return w.opened; });
    for (int p = 0; p < fabric_->n_pes; ++p) {
      const loopback_window& theirs = fabric_->windows[p];
      if (p == pe_ || fabric_->dead(p) || theirs.memory.empty()) continue;
      mine.views[p] = usable.fn == nullptr || usable.fn(usable.ctx, theirs.memory);
    }
    mine.decided = true;
    fabric_->regions_changed.notify_all();
    wait_for_all(lock, call, [](const loopback_window& w) { return w.decided; });
    window_ = mine.memory;
    return window_;
  }

  void return_borrowed(int pe, std::uint64_t token) override {
    check_pe(pe, "loopback_network::return_borrowed");
    if (self_dead() || fabric_->dead(pe)) return;
    loopback_endpoint& sender = *fabric_->pes[pe];
    std::lock_guard lock(sender.mutex);
    sender.returned.push_back(token);
  }

  void put(int pe, const void* local, std::size_t bytes, network_region region, std::uint64_t offset,
           network_done done) override {
    std::byte* remote = reach(pe, region, offset, bytes, "loopback_network::put");
    if (self_dead()) return limbo_.push_back({done});
    if (remote == nullptr) return complete(done, network_status::peer_failed);
    if (bytes != 0) std::memcpy(remote, local, bytes);
    complete(done, network_status::ok);
  }

  void get(int pe, void* local, std::size_t bytes, network_region region, std::uint64_t offset,
           network_done done) override {
    std::byte* remote = reach(pe, region, offset, bytes, "loopback_network::get");
    if (self_dead()) return limbo_.push_back({done});
    if (remote == nullptr) return complete(done, network_status::peer_failed);
    if (bytes != 0) std::memcpy(local, remote, bytes);
    complete(done, network_status::ok);
  }

  void atomic(int pe, network_atomic op, unsigned width, bool fetch, network_region region, std::uint64_t offset,
              std::uint64_t value, std::uint64_t compare, network_done done) override {
    if (width != 4 && width != 8)
      throw error(errc::invalid_argument, "loopback_network::atomic", fmt::format("width {}", width));
    if (offset % width != 0) throw error(errc::invalid_argument, "loopback_network::atomic", "misaligned word");
    std::byte* remote = reach(pe, region, offset, width, "loopback_network::atomic");
    if (self_dead()) return limbo_.push_back({done});
    if (remote == nullptr) return complete(done, network_status::peer_failed);
    const std::uint64_t old = width == 4 ? apply(reinterpret_cast<std::uint32_t*>(remote), op, value, compare)
                                         : apply(reinterpret_cast<std::uint64_t*>(remote), op, value, compare);
    complete(done, network_status::ok, fetch ? old : 0);
  }

  // One-sided operations are applied when issued, so they are ordered and complete at their targets
  // already; only their completions may be held back.
  void fence() override {}
  void flush(int pe, network_done done) override {
    if (pe != kNetworkAllPes) check_pe(pe, "loopback_network::flush");
    if (self_dead()) return limbo_.push_back({done});
    complete(done, pe != kNetworkAllPes && fabric_->dead(pe) ? network_status::peer_failed : network_status::ok);
  }

  bool progress() override {
    if (self_dead()) return false;
    std::deque<loopback_message> arrived;
    std::deque<std::uint64_t> returned;
    {
      loopback_endpoint& me = *fabric_->pes[pe_];
      std::lock_guard lock(me.mutex);
      arrived.swap(me.inbox);
      returned.swap(me.returned);
    }
    bool busy = !arrived.empty() || !returned.empty() || !lent_out_.empty();
    settle_lent_out(returned);
    for (const loopback_message& m : arrived) {
      const handler_entry& h = handlers_[m.handler];
      if (h.fn == nullptr)
        throw error(errc::internal, "loopback_network::progress",
                    fmt::format("a message from PE {} for handler {}, which has none", m.from, m.handler));
      network_message message{m.from, m.header, m.payload};
      if (!m.by_reference.empty()) {
        message.payload = m.by_reference;
        message.borrowed = m.token;
        h.fn(h.ctx, message);
        continue;
      }
      // A lent buffer costs the fabric a copy here; what it tests is the handler's ownership of it.
      const network_lender& lender = lenders_[m.handler];
      if (lender.lend && !m.payload.empty() && m.payload.size() >= lender.min_bytes) {
        if (std::byte* buffer = lender.lend(lender.ctx, m.payload.size())) {
          std::memcpy(buffer, m.payload.data(), m.payload.size());
          message.payload = {buffer, m.payload.size()};
          message.lent = buffer;
        }
      }
      h.fn(h.ctx, message);
    }
    if (!held_.empty()) {
      busy = true;  // something is still to come
      std::vector<pending_completion> still;
      for (pending_completion& c : held_) (rng_() % 2 == 0 ? ready_ : still).push_back(c);
      held_.swap(still);
      std::shuffle(ready_.begin(), ready_.end(), rng_);
    }
    // Completions may issue operations, whose completions go to a fresh list.
    std::vector<pending_completion> due;
    due.swap(ready_);
    for (const pending_completion& c : due) c.done(c.status, c.value);
    return busy || !due.empty();
  }

 private:
  struct handler_entry {
    network_handler fn = nullptr;
    void* ctx = nullptr;
  };

  template <typename T>
  static T apply(T* word, network_atomic op, std::uint64_t value, std::uint64_t compare) {
    std::atomic_ref<T> ref(*word);
    const T v = static_cast<T>(value);
    switch (op) {
      case network_atomic::add:
        return ref.fetch_add(v);
      case network_atomic::bit_and:
        return ref.fetch_and(v);
      case network_atomic::bit_or:
        return ref.fetch_or(v);
      case network_atomic::bit_xor:
        return ref.fetch_xor(v);
      case network_atomic::swap:
        return ref.exchange(v);
      case network_atomic::compare_swap: {
        T expected = static_cast<T>(compare);
        ref.compare_exchange_strong(expected, v);
        return expected;
      }
    }
    throw error(errc::invalid_argument, "loopback_network::atomic", "unknown op");
  }

  void check_pe(int pe, const char* call) const {
    if (pe < 0 || pe >= fabric_->n_pes) throw error(errc::invalid_argument, call, fmt::format("PE {}", pe));
  }
  static void check_handler(unsigned id, const char* call) {
    if (id >= kNetworkHandlers) throw error(errc::invalid_argument, call, fmt::format("handler id {}", id));
  }
  bool self_dead() const { return fabric_->dead(pe_); }

  // Whether PE `pe` kept a view of this PE's window (final once open_payload_window returned).
  bool viewed_by(int pe) const {
    std::lock_guard lock(fabric_->mutex);
    const loopback_window& theirs = fabric_->windows[pe];
    return theirs.decided && theirs.views[pe_];
  }

  // Waits (bounded) until every live PE's window satisfies `reached`.
  template <typename Reached>
  void wait_for_all(std::unique_lock<std::mutex>& lock, const char* call, Reached reached) {
    const bool all = fabric_->regions_changed.wait_for(lock, kExposeTimeout, [&] {
      for (int p = 0; p < fabric_->n_pes; ++p)
        if (!fabric_->dead(p) && !reached(fabric_->windows[p])) return false;
      return true;
    });
    if (!all) throw error(errc::timeout, call, "not every PE opened its window in time");
  }

  // Borrowed payloads given back complete their sends; those whose receiver died fail theirs.
  void settle_lent_out(const std::deque<std::uint64_t>& returned) {
    for (std::size_t i = 0; i < lent_out_.size();) {
      const lent_payload& l = lent_out_[i];
      const bool back = std::find(returned.begin(), returned.end(), l.token) != returned.end();
      if (back || fabric_->dead(l.to)) {
        complete(l.done, back ? network_status::ok : network_status::peer_failed);
        lent_out_[i] = lent_out_.back();
        lent_out_.pop_back();
      } else {
        ++i;
      }
    }
  }

  // The address of [offset, +bytes) in PE pe's region, or nullptr if pe is dead.
  std::byte* reach(int pe, network_region region, std::uint64_t offset, std::size_t bytes, const char* call) {
    check_pe(pe, call);
    if (fabric_->dead(pe)) return nullptr;
    std::lock_guard lock(fabric_->mutex);
    const auto& theirs = fabric_->regions[pe];
    if (region.id >= theirs.size() || !theirs[region.id].live)
      throw error(errc::invalid_argument, call, fmt::format("region {} is not exposed at PE {}", region.id, pe));
    const exposed_range& r = theirs[region.id];
    if (offset > r.bytes || bytes > r.bytes - offset)
      throw error(errc::invalid_argument, call,
                  fmt::format("[{}, +{}) beyond region {} of {} bytes", offset, bytes, region.id, r.bytes));
    return r.base + offset;
  }

  void complete(network_done done, network_status status, std::uint64_t value = 0) {
    (fabric_->options.reorder_completions ? held_ : ready_).push_back({done, status, value});
  }

  std::shared_ptr<loopback_fabric::state> fabric_;
  int pe_;
  network_capabilities capabilities_;
  handler_entry handlers_[kNetworkHandlers];
  network_lender lenders_[kNetworkHandlers];
  std::vector<pending_completion> ready_;  // run at the next progress()
  std::vector<pending_completion> held_;   // reorder_completions: released at random
  std::vector<pending_completion> limbo_;  // issued after this PE died: never complete (canceled at the end)
  struct lent_payload {
    std::uint64_t token;
    int to;
    network_done done;
  };
  std::span<std::byte> window_;         // this PE's payload window, once opened
  std::vector<lent_payload> lent_out_;  // sends by reference whose payload was not returned yet
  std::uint64_t next_token_ = 1;
  std::mt19937_64 rng_;
};

}  // namespace

loopback_fabric::loopback_fabric(int n_pes, const loopback_options& options) : state_(std::make_shared<state>()) {
  if (n_pes <= 0) throw error(errc::invalid_argument, "loopback_fabric", fmt::format("n_pes {}", n_pes));
  state_->n_pes = n_pes;
  state_->options = options;
  for (int p = 0; p < n_pes; ++p) state_->pes.push_back(std::make_unique<loopback_endpoint>());
  state_->regions.resize(n_pes);
  state_->windows.resize(n_pes);
}

loopback_fabric::~loopback_fabric() = default;

int loopback_fabric::n_pes() const noexcept { return state_->n_pes; }

std::unique_ptr<network> loopback_fabric::connect(int pe) {
  if (pe < 0 || pe >= state_->n_pes) throw error(errc::invalid_argument, "loopback_fabric::connect", "PE out of range");
  std::lock_guard lock(state_->mutex);
  if (state_->pes[pe]->connected)
    throw error(errc::invalid_argument, "loopback_fabric::connect", fmt::format("PE {} is connected already", pe));
  state_->pes[pe]->connected = true;
  return std::make_unique<loopback_network>(state_, pe);
}

void loopback_fabric::kill(int pe) {
  if (pe < 0 || pe >= state_->n_pes) throw error(errc::invalid_argument, "loopback_fabric::kill", "PE out of range");
  loopback_endpoint& e = *state_->pes[pe];
  e.dead.store(true, std::memory_order_release);
  {
    std::lock_guard lock(e.mutex);
    e.inbox.clear();
  }
  std::lock_guard lock(state_->mutex);
  state_->regions_changed.notify_all();
}

bool loopback_fabric::killed(int pe) const { return pe >= 0 && pe < state_->n_pes && state_->dead(pe); }

}  // namespace shoal::detail
