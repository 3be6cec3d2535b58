// Host threads as producers of a proxy ring: post a request and wait for it with a deadline, as the
// engine's tests do (the host API posts through one-thread kernels instead: host/proxy_calls.hpp). Device
// code uses proxy_ring.hpp's functions directly with its own abort callback; this is the host's
// counterpart, built on the same functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include "shoal/detail/proxy_ring.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {

// The abort callback of a host wait: spins briefly, then yields between polls (so producers and the proxy
// thread share a few cores), and gives up at `until`.
struct proxy_host_deadline {
  std::chrono::steady_clock::time_point until;

  static constexpr std::uint64_t kSpinPolls = 256;
  bool operator()(std::uint64_t polls) const {
    if (polls < kSpinPolls) return false;
    std::this_thread::yield();
    return polls % 16 == 0 && std::chrono::steady_clock::now() > until;
  }
  static proxy_host_deadline after(std::chrono::nanoseconds timeout) {
    return {std::chrono::steady_clock::now() + timeout};
  }
};

struct proxy_host_result {
  proxy_status status = proxy_status::ok;
  std::uint64_t sequence = 0;  // the request's ticket, when it was posted
  std::uint64_t value = 0;     // a fetching atomic's old value
};

// Posts `r` and returns once its slot is published (not once it is done): non-blocking in the OpenSHMEM
// sense. Fails with the codec's status for a bad request, consumer_stopped or aborted.
inline proxy_host_result proxy_host_post(const proxy_ring_view& ring, const proxy_request& r,
                                         std::chrono::nanoseconds timeout) {
  const proxy_ticket t = proxy_post(ring, r, proxy_host_deadline::after(timeout));
  return {t.status, t.sequence, 0};
}

// Posts `r` and waits until it is complete (puts and gets: remotely complete; atomics: applied, with the
// old value of a fetching one read from its result slot r.completion, which the caller owns). A quiet
// waits for every request before it.
inline proxy_host_result proxy_host_call(const proxy_ring_view& ring, const proxy_request& r,
                                         std::chrono::nanoseconds timeout) {
  const proxy_host_deadline deadline = proxy_host_deadline::after(timeout);
  const proxy_ticket t = proxy_post(ring, r, deadline);
  if (t.status != proxy_status::ok) return {t.status, t.sequence, 0};
  const proxy_status s = r.op == proxy_op::quiet ? proxy_wait_complete_before(ring, t.sequence + 1, deadline)
                                                 : proxy_wait_complete(ring, t.sequence, deadline);
  if (s != proxy_status::ok) return {s, t.sequence, 0};
  const bool fetches = r.op == proxy_op::atomic && proxy_atomic_fetches(r.atomic_op);
  return {s, t.sequence, fetches ? proxy_result(ring, r.completion) : 0};
}

// quiet to every peer: everything this PE posted before the call is complete when it returns ok.
inline proxy_status proxy_host_quiet(const proxy_ring_view& ring, std::chrono::nanoseconds timeout) {
  return proxy_host_call(ring, proxy_request{.op = proxy_op::quiet, .pe = kProxyAllPes}, timeout).status;
}

// The shoal::error for a failed host proxy call. consumer_stopped means the proxy thread stopped or failed:
// the caller should prefer the engine's own error (proxy_engine::check()), which names the peer.
inline error proxy_host_error(proxy_status s, std::string_view call) {
  switch (s) {
    case proxy_status::aborted:
      return error(errc::timeout, call, "the proxy did not complete the request in time");
    case proxy_status::consumer_stopped:
      return error(errc::peer_failure, call, "the proxy thread stopped (a peer failed or the job is ending)");
    default:
      return error(errc::invalid_argument, call, std::string("bad proxy request: ") + to_string(s));
  }
}

}  // namespace shoal::detail
