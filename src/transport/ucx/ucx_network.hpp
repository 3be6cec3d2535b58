// The UCX engine behind detail::network (see transport/network.hpp for the contract): one UCP context and
// one single-threaded worker per PE, an endpoint to every PE (itself included) in peer error-handling mode,
// messages as UCP active messages put back into per-pair order here, one-sided operations as UCP RMA and
// AMO on rkeys exchanged by expose(). Only the proxy thread touches it; nothing here is thread-safe.
//
// Every UCX callback only records what happened (a finished operation, an arrived message); progress()
// runs the user's completions and handlers afterwards, outside UCX, so they may issue new operations.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "transport/network.hpp"

namespace shoal::detail::ucx {

class ucx_network;

// How long UCX gets to end the requests to a peer that failed before they are reported failed anyway.
inline constexpr double kFailedPeerGrace = 1.0;

inline double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// The only active-message ids this engine registers: user messages, the connection handshake, and the
// return of payloads borrowed from a sender's window.
inline constexpr unsigned kMessageAm = 0;
inline constexpr unsigned kHelloAm = 1;
inline constexpr unsigned kReturnAm = 2;

// Framing in front of the user's header in every message. `seq` counts the messages from `from` to the
// receiver, from 0, so the receiver can deliver them in the order they were sent whatever order UCP
// hands them over in (UCP does not promise any: rendezvous data lands later than eager messages sent
// after it). With kHeaderInData the user's header travels at the front of the data instead (it did not
// fit UCP's header limit).
struct wire_header {
  std::uint64_t seq;
  std::uint32_t from;
  std::uint32_t header_bytes;
  std::uint8_t handler;
  std::uint8_t flags;
  std::uint8_t reserved[6];
};
static_assert(sizeof(wire_header) == 24);
inline constexpr std::uint8_t kHeaderInData = 1;
// With kPayloadInWindow a window_ref follows the wire_header (before the user's header) and the message
// carries no data: the payload lies in the sender's window (open_payload_window), where the receiver reads
// it, and goes back with `token` in a kReturnAm message.
inline constexpr std::uint8_t kPayloadInWindow = 2;
struct window_ref {
  std::uint64_t offset;  // from the start of the sender's window
  std::uint64_t bytes;
  std::uint64_t token;
};

enum class op_kind : std::uint8_t { send, put, get, atomic, flush, close };

// State of one operation that UCX holds a request for. Pooled: issuing reuses a free one, so the common
// path allocates nothing (a header too large for `inline_header` is the exception).
struct op {
  ucx_network* net = nullptr;
  op_kind kind = op_kind::send;
  bool in_use = false;
  bool fetch = false;
  bool abandoned = false;  // its peer failed and UCX never ended it: reported, kept until UCX lets go
  unsigned width = 8;
  int pe = -1;
  int pending = 0;  // flush of several endpoints: requests still out
  network_status status = network_status::ok;
  network_done done;
  // Atomic operand and reply; UCX reads and writes them until the request completes.
  std::uint32_t operand32 = 0, reply32 = 0;
  std::uint64_t operand64 = 0, reply64 = 0;
  // A message's UCP header (framing + user header), kept until the send completes.
  static constexpr std::size_t kInlineHeader = 192;
  std::byte inline_header[kInlineHeader];
  std::vector<std::byte> heap_bytes;  // a header or header+payload that did not fit inline / in UCP's limit
  op* next_free = nullptr;
};

// A message that arrived but is not delivered yet: held for order, or waiting for rendezvous data.
struct inbound {
  int from = -1;
  std::uint8_t handler = 0;
  std::uint64_t seq = 0;
  bool ready = false;   // all bytes are here
  bool failed = false;  // its rendezvous data could not be fetched
  std::vector<std::byte> header;
  std::vector<std::byte> data;  // payload, preceded by data_header_bytes of user header (kHeaderInData)
  std::size_t data_header_bytes = 0;
  std::byte* lent = nullptr;  // the payload's buffer, from the handler's lender (then `data` is unused)
  std::size_t lent_bytes = 0;
  std::span<const std::byte> borrowed;  // the payload in the sender's window (then `data` is unused)
  std::uint64_t token = 0;              // ... returned with this token (0: nothing borrowed)
  ucx_network* net = nullptr;
};

struct peer {
  ucx_network* net = nullptr;
  int pe = -1;
  ucp_ep_h ep = nullptr;
  bool failed = false;
  ucs_status_t failure = UCS_OK;
  double failed_at = 0;  // steady seconds
  bool hello_received = false;
  std::uint64_t next_send_seq = 0;
  std::uint64_t next_recv_seq = 0;
  std::map<std::uint64_t, inbound*> held;  // arrived early or still receiving, by seq
  // Payload windows: this PE's view of the peer's window (empty if none), the rkey that maps it, and
  // whether the peer reads this PE's window in place (so sends from it travel by reference).
  std::span<const std::byte> window_view;
  ucp_rkey_h window_rkey = nullptr;
  bool views_my_window = false;
};

struct region_state {
  bool live = false;
  memory_kind kind = memory_kind::host;
  ucp_mem_h memh = nullptr;
  std::vector<std::uint64_t> base;   // per PE
  std::vector<std::uint64_t> bytes;  // per PE
  std::vector<ucp_rkey_h> rkey;      // per PE; null where the range is empty or the peer failed
};

class ucx_network final : public network {
 public:
  explicit ucx_network(bootstrap& boot);
  ~ucx_network() override;
  ucx_network(const ucx_network&) = delete;
  ucx_network& operator=(const ucx_network&) = delete;

  int pe() const noexcept override { return pe_; }
  int n_pes() const noexcept override { return n_pes_; }
  const network_capabilities& capabilities() const noexcept override { return caps_; }

  void on_message(std::uint8_t id, network_handler handler, void* ctx) override;
  void lend_payloads(std::uint8_t id, network_lender lender) override;
  network_region expose(void* base, std::size_t bytes, memory_kind kind) override;
  void withdraw(network_region region) override;
  void send(int pe, std::uint8_t handler, std::span<const std::byte> header, std::span<const std::byte> payload,
            network_done done) override;
  void put(int pe, const void* local, std::size_t bytes, network_region region, std::uint64_t offset,
           network_done done) override;
  void get(int pe, void* local, std::size_t bytes, network_region region, std::uint64_t offset,
           network_done done) override;
  void atomic(int pe, network_atomic op, unsigned width, bool fetch, network_region region, std::uint64_t offset,
              std::uint64_t value, std::uint64_t compare, network_done done) override;
  void fence() override;
  void flush(int pe, network_done done) override;
  bool progress() override;

  // For UCX's completion and error callbacks (in unnamed namespaces of the .cpp files).
  void complete(op* o, ucs_status_t status);
  void peer_failed(int pe, ucs_status_t status);
  void message_arrived(const void* header, std::size_t header_bytes, void* data, std::size_t bytes,
                       const ucp_am_recv_param_t* param);
  void hello_arrived(const void* header, std::size_t header_bytes);
  void rendezvous_done(inbound* m, ucs_status_t status);
  void payload_returned(const void* header, std::size_t header_bytes);
  std::span<std::byte> open_payload_window(std::size_t bytes, payload_view_check usable) override;
  void return_borrowed(int pe, std::uint64_t token) override;

 private:
  struct completion {
    network_done done;
    network_status status;
    std::uint64_t value;
  };
  struct handler_slot {
    network_handler fn = nullptr;
    void* ctx = nullptr;
  };

  void start(bootstrap& boot);
  void connect(bootstrap& boot);
  void detect_capabilities();
  void shutdown(double budget_s) noexcept;  // waits at most budget_s for flushes, then again for closes

  op* take_op(op_kind kind, int pe, network_done done);
  void release_op(op* o) noexcept;
  // Turns what a UCX *_nbx call returned into: a request that will call back, or a completion now.
  void issued(op* o, ucs_status_ptr_t request);
  void finish_now(network_done done, network_status status, std::uint64_t value = 0);
  void flush_live_peers(op* o);
  void reap_failed_peers(double grace_s);

  void check_pe(const char* call, int pe) const;
  void check_handler(const char* call, unsigned id) const;
  const region_state& check_region(const char* call, int pe, network_region region, std::uint64_t offset,
                                   std::size_t bytes) const;
  ucp_request_param_t request_param(op* o) const;

  inbound* take_inbound();
  void release_inbound(inbound* m) noexcept;
  void borrow_payload(inbound* m, const std::byte* rest, std::size_t rest_bytes);
  void hold(inbound* m);
  void deliver(inbound* m);

  // Runs a bootstrap collective on a helper thread while this thread keeps the worker progressing (and
  // queueing what completes): a peer may need this PE's progress (a TCP flush, an emulated atomic, a
  // connection) before it can reach the same collective.
  void collective(const std::function<void()>& fn);
  // Runs `until` between progress calls until it holds or `deadline_s` passes; false on the deadline.
  template <typename Until>
  bool progress_until(double deadline_s, Until until);

  bootstrap* boot_ = nullptr;  // expose() and withdraw() are collectives over it
  int pe_ = -1;
  int n_pes_ = 0;
  double timeout_s_ = 60;
  network_capabilities caps_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::size_t max_am_header_ = 0;
  std::vector<peer> peers_;
  std::vector<region_state> regions_;
  handler_slot handlers_[kNetworkHandlers];
  network_lender lenders_[kNetworkHandlers];

  std::vector<std::unique_ptr<op>> ops_;
  op* free_ops_ = nullptr;
  int ops_in_flight_ = 0;
  int abandoned_ = 0;
  bool reap_due_ = false;  // some peer failed and operations to it may still be out
  std::vector<std::unique_ptr<inbound>> inbound_all_;
  std::vector<inbound*> free_inbound_;

  // This PE's payload window (ucp_mem_map with UCP_MEM_MAP_ALLOCATE: memory that the shared-memory
  // transports let peers map), and the sends by reference whose payload is not back yet, by token.
  ucp_mem_h window_memh_ = nullptr;
  std::span<std::byte> window_;
  std::map<std::uint64_t, op*> lent_out_;
  std::uint64_t next_token_ = 1;
  void close_payload_window() noexcept;

  std::deque<completion> completions_;  // due, run by progress()
  std::deque<inbound*> ready_;          // in order, run by progress()
};

template <typename Until>
bool ucx_network::progress_until(double deadline_s, Until until) {
  for (;;) {
    const unsigned events = ucp_worker_progress(worker_);
    if (until()) return true;
    if (now_s() > deadline_s) return false;
    if (events == 0) std::this_thread::yield();
  }
}

}  // namespace shoal::detail::ucx
