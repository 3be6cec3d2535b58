// Inside the proxy engine (proxy_engine.hpp is the interface): the state of the proxy thread, shared by
// proxy_engine.cpp (the loop, the initiator side) and proxy_engine_serve.cpp (messages from peers).
// Everything here is touched by the proxy thread only, except the failure record and the counters.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transport/proxy_engine.hpp"
#include "transport/proxy_wire.hpp"

namespace shoal::detail {

using proxy_clock = std::chrono::steady_clock;

// What a message in flight needs after it was handed to the network: its header, its staged payload and
// a way back to the engine. The network's completion owns and deletes it. `engine` is shared with every
// message in flight and cleared when the engine is destroyed, so a completion that runs later (from a
// network being shut down) only frees the message.
struct proxy_engine_link {
  proxy_engine_core* core = nullptr;
};
struct proxy_outgoing {
  std::shared_ptr<proxy_engine_link> link;
  int pe = -1;
  std::uint8_t handler = kProxyRequestHandler;
  proxy_wire_header header{};
  std::byte* payload = nullptr;  // header.bytes bytes for put_data and get_data, else none
  std::size_t payload_bytes = 0;
  local_memory* lender = nullptr;  // the memory that lent `payload`; null: it is ours (new[])

  proxy_outgoing() = default;
  proxy_outgoing(const proxy_outgoing&) = delete;
  proxy_outgoing& operator=(const proxy_outgoing&) = delete;
  // A lent payload goes back only while the engine lives: after detach() its memory may be going away.
  ~proxy_outgoing() {
    if (lender == nullptr)
      delete[] payload;
    else if (link->core != nullptr)
      lender->give_back(payload);
  }
};


// A request consumed from the ring and not yet complete, in requests_[sequence & (window - 1)]: the ring
// never has more than `window` of them, so the index is unique.
struct proxy_pending {
  bool active = false;
  proxy_request request{};
  std::uint64_t replies_expected = 0;
  std::uint64_t replies = 0;
  std::uint64_t old_value = 0;  // fetching atomics
};

// Part of a request still to be sent to its target: a data range [next, end) cut into chunks as the
// window allows, or one signal or atomic message.
struct proxy_send_item {
  std::uint64_t sequence = 0;
  proxy_wire_kind kind = proxy_wire_kind::put_data;
  std::uint64_t next = 0;
  std::uint64_t end = 0;
};

// A payload read in place from a peer's window (network_message::borrowed), returned after the flush
// that completes its write.
struct proxy_borrowed {
  int from = -1;
  std::uint64_t token = 0;
};

// One pass of the loop's work that waits for its local flush (local_memory::flush_begin): once flushed,
// its lent payloads go back, its messages are sent and its requests complete, in that order.
struct proxy_batch {
  std::uint64_t ticket = 0;
  proxy_clock::time_point began{};
  std::vector<std::unique_ptr<proxy_outgoing>> staged;
  std::vector<std::uint64_t> finished;
  std::vector<std::byte*> lent;
  std::vector<proxy_borrowed> borrowed;
};

struct proxy_peer {
  std::deque<proxy_send_item> queue;  // in ticket order: the order the target applies them in
  std::uint64_t window_bytes = 0;     // data in flight (see kProxyPeerWindowBytes)
  std::uint64_t awaiting = 0;         // replies outstanding from this peer
  proxy_clock::time_point last_heard{};
  bool dead = false;
};

class proxy_engine_core {
 public:
  proxy_engine_core(const proxy_ring_view& ring, network& net, local_memory& memory, const proxy_limits& limits,
                    const proxy_engine_options& options);

  void run(const std::atomic<bool>& stop_requested);  // the proxy thread's body; never throws
  void stop_ring() { consumer_.stop(); }
  void detach();  // the engine is going away: completions and messages from now on are dropped

  // First failure wins. `pe` is the peer involved (or -1), `request` the ticket (if any).
  void fail(errc category, int pe, std::optional<std::uint64_t> request, const std::string& detail);
  void check() const;
  // What is in flight, in words: the requests consumed and not complete (the oldest named), what each peer
  // owes or is owed, the flushes outstanding. Proxy thread only; fail() logs it with the first failure.
  std::string in_flight() const;
  bool awaits_flush(std::uint64_t sequence) const;  // complete once a flush ends (finished_ or a batch's)
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  void heap_mapped(std::uint64_t bytes) noexcept { heap_mapped_.store(bytes, std::memory_order_release); }
  proxy_engine_counters counters() const noexcept;
  // The pass in progress, if it has run for at least `at_least` (read by the watchdog thread).
  std::optional<proxy_stall> stall(proxy_clock::time_point now, std::chrono::milliseconds at_least) const;

  // Network callbacks (proxy thread, from network::progress()).
  static void on_request_message(void* ctx, const network_message& m);
  static void on_reply_message(void* ctx, const network_message& m);
  static void on_sent(void* ctx, network_status status, std::uint64_t value);
  static std::byte* lend(void* ctx, std::size_t bytes);
  static void give_back(void* ctx, std::byte* buffer);

 private:
  bool consume();  // ring -> pending requests and send items
  void dispatch(const proxy_request& r);
  bool pump();                       // send items -> staged outgoing messages, as windows allow
  bool settle();                     // flush this pass's batch; release the batches whose flush completed
  void release(proxy_batch& batch);  // send, give back and complete what waited for the batch's flush
  void probe();
  void serve(const network_message& m, const proxy_wire_header& h);  // a peer's request
  void reply(const network_message& m, const proxy_wire_header& h);  // a reply to one of ours
  void bad_message(int from, const char* what);
  // Checks a message's sender, header and kind (a request, or a reply); reports a bad one and returns
  // false, else notes that its sender was heard from.
  bool accept(const network_message& m, bool request, proxy_wire_header& h);
  proxy_outgoing* stage(int pe, std::uint8_t handler, const proxy_wire_header& h, std::size_t payload_bytes);
  void finish(std::uint64_t sequence);  // all replies in: complete after the next flush
  void count(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

  proxy_ring_consumer consumer_;
  network& net_;
  local_memory& memory_;
  proxy_limits limits_;
  std::atomic<std::uint64_t> heap_mapped_;  // the prefix of limits_.heap_bytes that is mapped (heap_mapped())
  // limits_ with the heap cut to what is mapped: what requests and messages are checked against.
  proxy_limits mapped_limits() const noexcept {
    proxy_limits l = limits_;
    l.heap_bytes = std::min(l.heap_bytes, heap_mapped_.load(std::memory_order_acquire));
    return l;
  }
  proxy_engine_options options_;
  int pe_;
  std::shared_ptr<proxy_engine_link> link_;

  std::vector<proxy_pending> requests_;
  std::vector<proxy_peer> peers_;
  std::vector<int> ready_;                               // peers with queued send items
  std::vector<std::unique_ptr<proxy_outgoing>> staged_;  // sent in this order after the next flush
  std::vector<std::uint64_t> finished_;                  // completed in the ring after the next flush
  std::vector<std::byte*> held_lent_;                    // payloads that arrived lent: given back after the next flush
  std::vector<proxy_borrowed> held_borrowed_;            // payloads read in peers' windows: returned after it
  void hold(const network_message& m);                   // the message's lent or borrowed payload, if any
  std::deque<proxy_batch> flushing_;                     // batches whose flush has begun, oldest first
  std::deque<std::uint64_t> quiets_;                     // quiet tickets, completed once all before them are
  std::uint64_t awaiting_ = 0;                           // sum of peers_[*].awaiting
  proxy_clock::time_point now_{};                        // read once per pass of the loop
  // For the watchdog: when the current pass began, and its step (null between passes). The thread
  // stores the time first and the step with release, so a step read with acquire comes with its time.
  std::atomic<proxy_clock::rep> pass_began_{0};
  std::atomic<const char*> step_{nullptr};
  void enter(const char* step) { step_.store(step, std::memory_order_release); }
  // When the oldest flush not yet seen complete began (flushing_.front()); 0 when none is outstanding.
  std::atomic<proxy_clock::rep> flush_began_{0};
  void leave_failed() noexcept;  // the thread ends on a failure: no step, and no flush it will settle
  proxy_clock::time_point next_probe_{};

  mutable std::mutex failure_mutex_;
  std::atomic<bool> failed_{false};
  std::optional<error> failure_;

  std::atomic<std::uint64_t> n_requests_{0}, n_sent_{0}, n_chunks_{0}, n_served_{0}, n_pings_{0},
      n_borrowed_{0};
};

}  // namespace shoal::detail
