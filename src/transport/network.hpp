// The proxy's network: messages between the PEs of a job, and one-sided access to memory that a PE has
// exposed, on top of a network engine (UCX; see ucx/ucx_network.hpp). The proxy thread of each PE owns one
// `network` and is its only user; nothing here knows about descriptors, rings or the symmetric heap, and
// nothing here needs CUDA (GPU memory is just an address of memory_kind::cuda).
//
// Completion model: every operation is non-blocking and takes a `network_done`, which runs later from
// progress() on the same thread. Nothing runs behind the caller's back: no callback, handler or
// completion runs outside progress().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace shoal {
class bootstrap;
}

namespace shoal::detail {

enum class network_status : std::uint8_t {
  ok,
  peer_failed,  // the target's endpoint failed (process died, connection lost): the operation did not happen
  canceled,     // the network was shut down before the operation completed
};

// What to run when an operation completes: a function and its context, so issuing costs no allocation.
// `value` is the old value of a fetching atomic, and 0 otherwise.
struct network_done {
  void (*fn)(void* ctx, network_status status, std::uint64_t value) = nullptr;
  void* ctx = nullptr;

  void operator()(network_status status, std::uint64_t value = 0) const {
    if (fn) fn(ctx, status, value);
  }
};

// A message as its handler sees it. Both spans are valid only during the handler call, unless the payload
// is in a lent buffer (`lent`, see network_lender): then the handler owns that buffer from the call on; or
// it is borrowed (`borrowed` != 0, see open_payload_window): then the payload stays where it is, in the
// sender's window, until the handler passes the token to network::return_borrowed (exactly once).
struct network_message {
  int from = -1;
  std::span<const std::byte> header;
  std::span<const std::byte> payload;
  std::byte* lent = nullptr;   // the payload's buffer when it came from the handler's lender, else null
  std::uint64_t borrowed = 0;  // nonzero: the payload lies in the sender's window, held for this token
};

// Where large payloads for one handler land: in buffers the receiver lends (its local_memory's pinned
// ones, say) rather than the network's own memory, so the receiver hands them on without a copy. For a
// payload of `min_bytes` or more the network calls `lend` (from inside progress()); a null answer means
// "use your own memory". A lent buffer passes to the handler with the message (network_message::lent),
// or back through `give_back` when the message cannot be delivered.
struct network_lender {
  std::byte* (*lend)(void* ctx, std::size_t bytes) = nullptr;
  void (*give_back)(void* ctx, std::byte* buffer) = nullptr;
  void* ctx = nullptr;
  std::size_t min_bytes = 0;
};
using network_handler = void (*)(void* ctx, const network_message& message);
inline constexpr unsigned kNetworkHandlers = 16;  // handler ids are 0 .. kNetworkHandlers - 1

// Whether `part` (non-empty) lies inside `whole`: a payload in a payload window, say.
inline bool lies_within(std::span<const std::byte> part, std::span<const std::byte> whole) noexcept {
  return !part.empty() && !whole.empty() && part.data() >= whole.data() &&
         part.data() + part.size() <= whole.data() + whole.size();
}

// Asked about each peer's window that this PE mapped (open_payload_window): whether this PE can use the
// view (a GPU heap registers it with CUDA, so the copy engines read it). A view it refuses stays unused.
struct payload_view_check {
  bool (*fn)(void* ctx, std::span<const std::byte> view) = nullptr;
  void* ctx = nullptr;
};

enum class memory_kind : std::uint8_t { host, cuda };

// Memory that every PE exposed together (expose() is collective): the same id names each PE's own range.
struct network_region {
  std::uint32_t id = ~0u;
  bool valid() const noexcept { return id != ~0u; }
};

enum class network_atomic : std::uint8_t { add, bit_and, bit_or, bit_xor, swap, compare_swap };

struct network_capabilities {
  std::string library;          // e.g. "UCX 1.13.1"
  std::string transports;       // what the engine uses between these PEs, e.g. "tcp" or "posix,sysv,cma"
  bool cuda_memory = false;     // expose(memory_kind::cuda) and put/get on GPU memory work directly
  bool remote_atomics = false;  // atomic() on exposed host memory is a network atomic (else: unsupported)
};

inline constexpr int kNetworkAllPes = -1;

class network {
 public:
  // Closes the connections (after a bounded flush). Completions of operations still outstanding may run
  // here, with `canceled` (the UCX engine runs them): the one exception to "only inside progress()", so
  // their contexts must outlive the network. Destroy the networks of a job after a common point (a
  // bootstrap barrier), or peers may see this one as failed.
  virtual ~network() = default;

  virtual int pe() const noexcept = 0;
  virtual int n_pes() const noexcept = 0;
  virtual const network_capabilities& capabilities() const noexcept = 0;

  // Installs the handler for messages sent to `id`. Call before the first message can arrive, i.e. before
  // the collective that follows construction; a message for an id with no handler is a fatal error.
  virtual void on_message(std::uint8_t id, network_handler handler, void* ctx) = 0;
  // Installs (or, with a default network_lender, removes) the lender of payloads for handler `id`. The
  // lender must outlive the network, or be removed first.
  virtual void lend_payloads(std::uint8_t id, network_lender lender) = 0;

  // Collective over all PEs, in the same order everywhere: [base, base + bytes) of every PE becomes
  // reachable by put/get/atomic from every PE. Throws shoal::error(errc::unsupported) for GPU memory
  // when capabilities().cuda_memory is false. withdraw() is collective too; in-flight operations on the
  // region must be complete (flush) before it.
  virtual network_region expose(void* base, std::size_t bytes, memory_kind kind) = 0;
  virtual void withdraw(network_region region) = 0;

  // Payload windows, what a NIC's DMA from registered memory is on a real network. Collective over all
  // PEs: each PE gets `bytes` of host memory from the network and maps every peer's window where the
  // engine can share memory between the two (UCX: shared-memory transports, ucp_rkey_ptr), keeping the
  // views `usable` accepts. The result is this PE's window, or empty when the engine has none. From then
  // on a send whose payload lies in the sender's window, to a PE that kept its view, travels by
  // reference: only the header crosses, the receiver's handler reads the payload in place
  // (network_message::borrowed), and the send's `done` runs once the receiver returns it. Call at most
  // once, before the first send that may use it.
  virtual std::span<std::byte> open_payload_window(std::size_t bytes, payload_view_check usable) = 0;
  // Gives a borrowed payload back to PE `pe`, its sender (the token of its network_message).
  virtual void return_borrowed(int pe, std::uint64_t token) = 0;

  // Sends header + payload to handler `handler` of PE `pe` (which may be this PE). Messages from one PE
  // to another arrive in the order they were sent. `done` runs when both buffers may be reused; it says
  // nothing about delivery (a reply message does that), except for a payload that travels by reference
  // (open_payload_window): then `done` means the receiver has finished reading it.
  virtual void send(int pe, std::uint8_t handler, std::span<const std::byte> header, std::span<const std::byte> payload,
                    network_done done) = 0;

  // One-sided, on an exposed region of PE `pe`, at byte `offset` from its base. `done` runs when: put:
  // `local` may be reused (the data may not be visible at the target yet: flush says when it is); get:
  // the data is in `local`; atomic: the target word was updated and, for fetch, `value` is the old one.
  // `width` is 4 or 8 bytes; `offset` must be aligned to it. No order among them unless fence() or
  // flush() is between.
  virtual void put(int pe, const void* local, std::size_t bytes, network_region region, std::uint64_t offset,
                   network_done done) = 0;
  virtual void get(int pe, void* local, std::size_t bytes, network_region region, std::uint64_t offset,
                   network_done done) = 0;
  virtual void atomic(int pe, network_atomic op, unsigned width, bool fetch, network_region region,
                      std::uint64_t offset, std::uint64_t value, std::uint64_t compare, network_done done) = 0;

  // Operations issued after fence() are applied at their targets after those issued before it.
  virtual void fence() = 0;
  // `done` runs when every operation issued before to `pe` (or to every PE, kNetworkAllPes) is complete
  // at its target: puts visible, atomics applied.
  virtual void flush(int pe, network_done done) = 0;

  // Makes progress and runs due completions and handlers on the calling thread. Returns true when
  // anything happened, so a caller can back off when idle.
  virtual bool progress() = 0;
};

// Whether this build has the UCX engine, and a line for shoal-info about what it can do ("UCX 1.13.1:
// host memory, network atomics; no GPU memory" or why it is absent). Needs no other PE.
bool ucx_network_available() noexcept;
std::string describe_ucx_network();

// Collective over every PE of `boot`: starts UCX, exchanges worker addresses through the bootstrap and
// connects to every PE. Throws shoal::error(errc::unsupported) in a build without UCX, and
// shoal::error(errc::peer_failure) naming the PE when a connection fails or a PE does not answer within
// SHOAL_BOOTSTRAP_TIMEOUT. `boot` must outlive the network: expose() and withdraw() run collectives on it.
std::unique_ptr<network> make_ucx_network(bootstrap& boot);

}  // namespace shoal::detail
