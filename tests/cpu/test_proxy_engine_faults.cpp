// The proxy engine when things go wrong: a killed peer (found by a failed send, or by the probe when it
// dies owing replies), a message or a descriptor that does not decode, and stop() with requests in
// flight. Every engine that sees a failure names it through check(); producers blocked on the ring return
// consumer_stopped, never their deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test_proxy_engine_job.hpp"
#include "transport/proxy_wire.hpp"

namespace shoal::detail::engine_test {
namespace {

// Waits (bounded) until `done` holds; false if it never did.
template <typename Done>
bool eventually(Done&& done) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// The error check() throws, or a test failure if it throws nothing.
error failure_of(proxy_engine& engine) {
  try {
    engine.check();
  } catch (const error& e) {
    return e;
  }
  ADD_FAILURE() << "the engine reports no failure";
  return error(errc::internal, "", "none");
}

// The put the watchdog tests hold up: PE 0's first 100 heap bytes to PE 1's offset 64.
constexpr proxy_request kHeldPut{.op = proxy_op::put, .pe = 1, .remote_offset = 64, .local = 0, .size = 100};

// Once the hold is off (stderr captured since before the put): the put completes and landed, and the
// watchdog logged `warning` exactly once for the whole stall.
void expect_landed_after_one_warning(engine_job& job, const std::string& warning) {
  EXPECT_EQ(proxy_host_quiet(job[0].ring, kPatience), proxy_status::ok);
  const std::string log = testing::internal::GetCapturedStderr();
  const std::size_t first = log.find(warning);
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(warning, first + 1), std::string::npos) << "warned more than once:\n" << log;
  EXPECT_EQ(std::memcmp(job[1].base() + 64, job[0].base(), 100), 0) << "the put did not land";
}

// A proxy thread stuck in one call (here PE 0's flush, as a CUDA call held up by another thread of the
// process can be) is named by the watchdog: stall() reports the step, the warning is logged once for the
// whole stall, and the request completes when the call returns.
TEST(ProxyEngineFaults, WatchdogWarnsOnceOfAPassThatDoesNotEnd) {
  std::atomic<bool> hold{true};
  engine_job job({.engine = {.stall_warning = 50ms},
                  .before_flush_begin =
                      [&] {
                        while (hold.load()) std::this_thread::sleep_for(1ms);
                      },
                  .seed = 5});
  job.start();
  testing::internal::CaptureStderr();
  ASSERT_EQ(proxy_host_post(job[0].ring, kHeldPut, kPatience).status, proxy_status::ok);
  ASSERT_TRUE(eventually([&] { return job[0].engine->stall(50ms).has_value(); }));
  const proxy_stall s = *job[0].engine->stall(50ms);
  EXPECT_STREQ(s.step, "flushing its copies");
  EXPECT_FALSE(s.flush);
  EXPECT_GE(s.seconds, 0.05);
  EXPECT_FALSE(job[1].engine->stall(50ms).has_value()) << "PE 1 had nothing to do: its thread is idle";
  std::this_thread::sleep_for(300ms);  // many watchdog periods of the same stall
  hold = false;
  expect_landed_after_one_warning(job, "the proxy thread has been flushing its copies for");
  job.stop_all();
}

// A flush that does not complete (as a CUDA stream that cannot start, while the thread goes on) is named
// by the watchdog too, once for the whole stall, and the request completes once the flush does.
TEST(ProxyEngineFaults, WatchdogWarnsOnceOfAFlushThatDoesNotComplete) {
  std::atomic<bool> held{true};
  engine_job job({.engine = {.stall_warning = 50ms}, .flushes_held = [&] { return held.load(); }, .seed = 7});
  job.start();
  testing::internal::CaptureStderr();
  ASSERT_EQ(proxy_host_post(job[0].ring, kHeldPut, kPatience).status, proxy_status::ok);
  ASSERT_TRUE(eventually([&] {
    const std::optional<proxy_stall> s = job[0].engine->stall(50ms);
    return s && s->flush;
  }));
  std::this_thread::sleep_for(300ms);  // many watchdog periods, and a probe's ping in a later flush
  const std::optional<proxy_stall> s = job[0].engine->stall(300ms);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->flush);
  EXPECT_GE(s->seconds, 0.35) << "the oldest flush is the one timed";
  held = false;
  expect_landed_after_one_warning(job, "the proxy's CUDA stream has not finished copies it was given");
  job.stop_all();
}

TEST(ProxyEngineFaults, KilledPeerIsReportedByEveryEngineAndBlockedProducersReturn) {
  engine_job job({.n_pes = 4, .heap_bytes = 1 << 20, .ring = {.capacity = 16, .window = 32, .result_slots = 8},
                  .engine = {.chunk_bytes = 4096}, .seed = 4});
  job.start();
  // Everyone talks to everyone first.
  for (int p = 0; p < 4; ++p)
    for (int q = 0; q < 4; ++q) {
      proxy_request r{.op = proxy_op::put, .pe = q, .remote_offset = 1000u * p, .local = 0, .size = 1000};
      ASSERT_EQ(proxy_host_call(job[p].ring, r, kPatience).status, proxy_status::ok);
    }
  job.fabric.kill(3);
  // Two threads on each survivor post more than the ring holds to PE 3 and to the others, then quiet.
  std::atomic<int> stopped{0}, aborted{0}, other{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < 3; ++p)
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&, p, t] {
        for (int i = 0; i < 100; ++i) {
          proxy_request r{.op = proxy_op::put, .pe = (i + t) % 4, .remote_offset = 8192, .local = 32768, .size = 9000};
          const proxy_status s = proxy_host_post(job[p].ring, r, kPatience).status;
          if (s == proxy_status::consumer_stopped) break;
          if (s != proxy_status::ok) (s == proxy_status::aborted ? aborted : other)++;
        }
        const proxy_status q = proxy_host_quiet(job[p].ring, kPatience);
        (q == proxy_status::consumer_stopped ? stopped : q == proxy_status::aborted ? aborted : other)++;
      });
  for (auto& th : threads) th.join();
  EXPECT_EQ(stopped.load(), 6) << "every quiet must fail: PE 3 never completes anything";
  EXPECT_EQ(aborted.load(), 0) << "a producer waited for its deadline instead of seeing the stopped ring";
  EXPECT_EQ(other.load(), 0);
  for (int p = 0; p < 3; ++p) {
    EXPECT_TRUE(job[p].engine->failed());
    const error e = failure_of(*job[p].engine);
    EXPECT_EQ(e.category(), errc::peer_failure) << e.what();
    EXPECT_NE(std::string(e.what()).find("PE 3 failed"), std::string::npos) << e.what();
    EXPECT_THROW(job[p].engine->stop(), error);
  }
  EXPECT_FALSE(job[3].engine->failed());  // it is the dead one: it noticed nothing
  EXPECT_NO_THROW(job[3].engine->stop());
}

TEST(ProxyEngineFaults, PeerThatDiesOwingRepliesIsFoundByTheProbe) {
  engine_job job({.n_pes = 2, .engine = {.probe_interval = 20ms}, .seed = 6});
  job.start();
  job[1].engine->stop();  // PE 1 stops serving: requests to it go unanswered
  const proxy_host_result posted =
      proxy_host_post(job[0].ring, proxy_request{.op = proxy_op::get, .pe = 1, .remote_offset = 64, .local = 128,
                                                 .size = 100},
                      kPatience);
  ASSERT_EQ(posted.status, proxy_status::ok);
  // Once the request went out (the send succeeded), PE 1 dies with the reply owed.
  ASSERT_TRUE(eventually([&] { return job[0].engine->counters().messages_sent >= 1; }));
  testing::internal::CaptureStderr();
  job.fabric.kill(1);
  EXPECT_EQ(proxy_wait_complete(job[0].ring, posted.sequence, proxy_host_deadline::after(kPatience)),
            proxy_status::consumer_stopped);
  EXPECT_GE(job[0].engine->counters().pings, 1u);
  const error e = failure_of(*job[0].engine);
  EXPECT_EQ(e.category(), errc::peer_failure);
  EXPECT_NE(std::string(e.what()).find("PE 1 failed: a ping"), std::string::npos) << e.what();
  // The log says what was in flight when it failed: the get, and what PE 1 owes.
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("in flight at the failure: requests consumed and not complete: 1 (the oldest, request " +
                     std::to_string(posted.sequence) +
                     ": get to PE 1, 100 bytes, 0 of 1 replies in); PE 1: 0 sends "
                     "queued, 100 bytes in flight, 1 replies owed"),
            std::string::npos)
      << log;
}

// An engine whose thread ends on a failure while a flush is outstanding never settles that flush: its watchdog
// must not go on timing it and blame the CUDA stream (it did, with a warning about the stream's copies and
// hardware work queues, while the real failure was elsewhere). PE 1 has no engine, so the memory that fails
// is PE 0's: its second flush begins while the first is held, and throws.
TEST(ProxyEngineFaults, EngineThatFailsReportsNoStalledFlush) {
  std::atomic<bool> held{true}, fail_next{false};
  engine_job job({.engines = 1,
                  .before_flush_begin =
                      [&] {
                        if (fail_next.exchange(false)) throw error(errc::system, "test memory", "flush_begin failed");
                      },
                  .flushes_held = [&] { return held.load(); },
                  .seed = 11});
  job.start();
  ASSERT_EQ(proxy_host_post(job[0].ring, kHeldPut, kPatience).status, proxy_status::ok);
  ASSERT_TRUE(eventually([&] {
    const std::optional<proxy_stall> s = job[0].engine->stall(std::chrono::milliseconds(1));
    return s && s->flush;
  }));
  fail_next = true;
  proxy_request second = kHeldPut;
  second.remote_offset += 128;
  ASSERT_EQ(proxy_host_post(job[0].ring, second, kPatience).status, proxy_status::ok);
  ASSERT_TRUE(eventually([&] { return job[0].engine->failed(); }));
  EXPECT_NE(std::string(failure_of(*job[0].engine).what()).find("flush_begin failed"), std::string::npos);
  EXPECT_FALSE(job[0].engine->stall(std::chrono::milliseconds(0)).has_value())
      << "the failed engine's watchdog still times the flush it left";
  held = false;
}

TEST(ProxyEngineFaults, MessageThatDoesNotDecodeIsReportedNamingItsSender) {
  // PE 2 has no engine: the test speaks for it through its network.
  engine_job job({.n_pes = 3, .engines = 2, .seed = 2});
  job.start();
  network& rogue = *job[2].net;
  const std::byte junk[10] = {};
  rogue.send(0, kProxyRequestHandler, junk, {}, {});
  // Well formed, but a reply to a request PE 1 never made.
  const proxy_wire_header ack{.kind = proxy_wire_kind::ack, .request = 12345};
  rogue.send(1, kProxyReplyHandler, proxy_wire_bytes(ack), {}, {});
  ASSERT_TRUE(eventually([&] {
    rogue.progress();
    return job[0].engine->failed() && job[1].engine->failed();
  }));
  for (int p = 0; p < 2; ++p) {
    const error e = failure_of(*job[p].engine);
    EXPECT_EQ(e.category(), errc::internal) << e.what();
    EXPECT_NE(std::string(e.what()).find("a message from PE 2 does not decode"), std::string::npos) << e.what();
  }
  EXPECT_NE(std::string(failure_of(*job[0].engine).what()).find("header of the wrong size"), std::string::npos);
  EXPECT_NE(std::string(failure_of(*job[1].engine).what()).find("reply to no outstanding request"), std::string::npos);
  // The rings are stopped: new requests fail at once instead of waiting.
  EXPECT_EQ(proxy_host_call(job[0].ring, proxy_request{.op = proxy_op::put, .pe = 1, .size = 8}, kPatience).status,
            proxy_status::consumer_stopped);
}

TEST(ProxyEngineFaults, DescriptorThatDoesNotDecodeStopsTheRing) {
  engine_job job({.n_pes = 2, .seed = 9});
  job.start();
  const proxy_ticket t = proxy_reserve(job[0].ring, proxy_host_deadline::after(kPatience));
  ASSERT_EQ(t.status, proxy_status::ok);
  proxy_descriptor bad{};
  bad.words[proxy_descriptor::kHeaderWord] = 31;  // op 31: no such op
  proxy_publish(job[0].ring, t.sequence, bad);
  EXPECT_EQ(proxy_wait_complete(job[0].ring, t.sequence, proxy_host_deadline::after(kPatience)),
            proxy_status::consumer_stopped);
  const error e = failure_of(*job[0].engine);
  EXPECT_EQ(e.category(), errc::internal);
  EXPECT_NE(std::string(e.what()).find("does not decode: unknown proxy op (request " + std::to_string(t.sequence)),
            std::string::npos)
      << e.what();
  EXPECT_FALSE(job[1].engine->failed());
}

// A heap maps a prefix of its reservation and grows: a request for bytes past what is mapped fails the
// engine with an error naming the call and the range, where a GPU heap's copy would fail with a bare CUDA
// error. Requests within it complete, and a growth (heap_mapped) lets the same request through.
TEST(ProxyEngineFaults, RequestBeyondTheMappedHeapIsRejectedNamingItsRange) {
  engine_job job({.n_pes = 2, .seed = 13});
  constexpr std::uint64_t kMapped = 256 << 10;
  for (int p = 0; p < 2; ++p) job[p].engine->heap_mapped(kMapped);
  job.start();
  const proxy_request within{.op = proxy_op::put, .pe = 1, .remote_offset = kMapped - 100, .local = 0, .size = 100};
  ASSERT_EQ(proxy_host_call(job[0].ring, within, kPatience).status, proxy_status::ok);
  EXPECT_EQ(std::memcmp(job[1].base() + kMapped - 100, job[0].base(), 100), 0);

  proxy_request beyond = within;
  beyond.remote_offset = kMapped - 99;  // its last byte is one past what is mapped
  EXPECT_EQ(proxy_host_call(job[0].ring, beyond, kPatience).status, proxy_status::consumer_stopped);
  const error e = failure_of(*job[0].engine);
  EXPECT_EQ(e.category(), errc::invalid_argument) << e.what();
  EXPECT_NE(std::string(e.what()).find("put to PE 1 names heap bytes beyond the 262144 mapped (remote [262045, "
                                       "262145), local [0, 100))"),
            std::string::npos)
      << e.what();
  EXPECT_FALSE(job[1].engine->failed());
}

TEST(ProxyEngineFaults, GrowthLetsARequestReachTheNewBytes) {
  engine_job job({.n_pes = 2, .seed = 14});
  for (int p = 0; p < 2; ++p) job[p].engine->heap_mapped(256 << 10);
  job.start();
  for (int p = 0; p < 2; ++p) job[p].engine->heap_mapped(512 << 10);
  const proxy_request put{.op = proxy_op::put_signal,
                          .signal_op = proxy_signal_op::set,
                          .pe = 1,
                          .remote_offset = 300 << 10,
                          .local = 0,
                          .size = 1000,
                          .value = 7,
                          .signal_offset = 400 << 10};
  ASSERT_EQ(proxy_host_call(job[0].ring, put, kPatience).status, proxy_status::ok);
  EXPECT_EQ(std::memcmp(job[1].base() + (300 << 10), job[0].base(), 1000), 0);
  EXPECT_EQ(job[1].load_atomic(400 << 10), 7u);
  job.stop_all();
}

// The target checks a message against its own mapped heap too: a sender that believes the heap larger
// (which a growth's meeting rules out) is named by the target, which stops serving.
TEST(ProxyEngineFaults, MessageBeyondTheTargetsMappedHeapIsReportedNamingItsSender) {
  engine_job job({.n_pes = 2, .seed = 15});
  job[1].engine->heap_mapped(256 << 10);
  job.start();
  const proxy_request put{.op = proxy_op::put, .pe = 1, .remote_offset = 300 << 10, .local = 0, .size = 8};
  ASSERT_EQ(proxy_host_post(job[0].ring, put, kPatience).status, proxy_status::ok);
  ASSERT_TRUE(eventually([&] { return job[1].engine->failed(); }));
  const error e = failure_of(*job[1].engine);
  EXPECT_NE(std::string(e.what()).find("a message from PE 0 names heap bytes beyond the 262144 mapped here: data "
                                       "range beyond the heap"),
            std::string::npos)
      << e.what();
}

TEST(ProxyEngineFaults, StopWithRequestsInFlightDoesNotHang) {
  engine_job job({.n_pes = 4, .heap_bytes = 1 << 20, .network = {.reorder_completions = true},
                  .engine = {.chunk_bytes = 4096, .peer_window_bytes = 8192}, .seed = 12});
  job.start();
  std::atomic<int> posted{0}, aborted{0};
  std::atomic<bool> halt{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < 4; ++p)
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&, p, t] {
        std::mt19937_64 rng(p * 10 + t);
        for (std::uint64_t i = 0; !halt; ++i) {
          const bool get = rng() % 2;
          const std::uint64_t n = 1 + rng() % 60000;
          // Gets land in a scratch range of the local heap; puts read from the local heap's first 64 KiB.
          proxy_request r{.op = get ? proxy_op::get : proxy_op::put, .pe = int(rng() % 4),
                          .remote_offset = 65536 + 65536 * std::uint64_t(t), .local = get ? 262144u + 65536u * t : 0,
                          .size = n};
          proxy_status s = proxy_host_post(job[p].ring, r, kPatience).status;
          if (s == proxy_status::ok && i % 50 == 49) s = proxy_host_quiet(job[p].ring, kPatience);
          if (s == proxy_status::aborted) aborted++;
          if (s != proxy_status::ok) return;
          posted++;
        }
      });
  const bool busy = eventually([&] { return posted.load() >= 2000; });
  for (int p = 0; p < 4; ++p) EXPECT_NO_THROW(job[p].engine->stop()) << "PE " << p;
  halt = true;
  for (auto& th : threads) th.join();
  EXPECT_TRUE(busy);
  EXPECT_EQ(aborted.load(), 0);
}

TEST(ProxyEngineFaults, MismatchedLimitsAreRejected) {
  loopback_fabric fabric(2);
  auto net = fabric.connect(0);
  std::vector<std::uint64_t> heap(128);
  host_local_memory memory(heap.data(), 1024);
  proxy_ring_layout layout{.capacity = 8, .window = 8, .result_slots = 4};
  std::vector<proxy_descriptor> storage((layout.shared_bytes() + 63) / 64);
  std::uint64_t head = 0;
  const proxy_ring_view ring = layout.carve(storage.data(), &head);
  proxy_ring_initialize(ring);
  const proxy_limits good{.n_pes = 2, .heap_bytes = 1024, .completion_slots = 4};
  const proxy_limits bad[] = {{.n_pes = 3, .heap_bytes = 1024, .completion_slots = 4},
                              {.n_pes = 2, .heap_bytes = 2048, .completion_slots = 4},
                              {.n_pes = 2, .heap_bytes = 1024, .completion_slots = 5}};
  for (const proxy_limits& limits : bad) {
    try {
      proxy_engine engine(ring, *net, memory, limits);
      ADD_FAILURE() << "accepted " << limits.n_pes << " PEs, " << limits.heap_bytes << " bytes, "
                    << limits.completion_slots << " slots";
    } catch (const error& e) {
      EXPECT_EQ(e.category(), errc::invalid_argument) << e.what();
    }
  }
  EXPECT_NO_THROW(proxy_engine(ring, *net, memory, good));
}

}  // namespace
}  // namespace shoal::detail::engine_test
