// The proxy ring with host threads as producers and one host thread as the proxy: every request is
// consumed exactly once and in ticket order, producers block on credits and proceed, sequences cross
// the 64-bit wrap, completions in any order release exactly the quiet-style waits they should, and a
// stopped or silent consumer turns every wait into an error within its deadline.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "shoal/detail/proxy_ring.hpp"

namespace shoal::detail {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A ring in plain memory: the shared part in 64-byte aligned storage, the head word beside it.
struct test_ring {
  proxy_ring_layout layout;
  std::vector<proxy_descriptor> storage;  // proxy_descriptor is 64-byte aligned, so the storage is
  std::uint64_t head = 0;
  proxy_ring_view view;

  test_ring(std::uint32_t capacity, std::uint32_t window, std::uint32_t result_slots, std::uint64_t first = 0)
      : layout{.capacity = capacity, .window = window, .result_slots = result_slots},
        storage((layout.shared_bytes() + 63) / 64) {
    EXPECT_TRUE(layout.valid());
    view = layout.carve(storage.data(), &head);
    proxy_ring_initialize(view, first);
  }
};

// Gives up at a deadline; yields between polls so that 8 producers and a consumer share 2 cores.
struct deadline_abort {
  clock_type::time_point until;
  std::uint64_t* waits = nullptr;  // counts polls that found the condition false
  bool operator()(std::uint64_t) const {
    if (waits != nullptr) ++*waits;
    std::this_thread::yield();
    return clock_type::now() > until;
  }
};
// The deadlines only turn a hang into a failure. On a loaded 2-core machine (a build beside ctest -j2) 20 s
// were once too few for the 40000 requests of WrapsAroundManyTimesAcrossTheSequenceWrap, which take well
// under a second alone; ctest stops a test at 120 s.
constexpr auto kWaitDeadline = 60s;
constexpr auto kRunDeadline = 100s;
deadline_abort patient(std::uint64_t* waits = nullptr) { return {clock_type::now() + kWaitDeadline, waits}; }
constexpr auto abort_now = [](std::uint64_t) { return true; };

// A put whose local word carries (producer, index), so the consumer can tell requests apart.
proxy_request tagged_put(std::uint32_t producer, std::uint32_t index) {
  return {.op = proxy_op::put,
          .local_is_address = true,
          .pe = 1,
          .remote_offset = 64,
          .local = (std::uint64_t{producer} << 32) | index,
          .size = 8};
}

// Producers post tagged puts; the consumer (this thread) checks ticket order and completes each request.
// Adds to *waited how many polls the producers spent waiting for credits.
void run_producers(test_ring& ring, unsigned producers, unsigned per_producer, std::uint64_t first,
                   bool quiet_every_16 = false, std::uint64_t* waited = nullptr) {
  std::vector<std::uint64_t> waits(producers, 0);
  std::vector<std::thread> threads;
  for (unsigned p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (unsigned i = 0; i < per_producer; ++i) {
        const proxy_ticket t = proxy_post(ring.view, tagged_put(p, i), patient(&waits[p]));
        ASSERT_EQ(t.status, proxy_status::ok) << to_string(t.status);
        if (quiet_every_16 && i % 16 == 15) {
          ASSERT_EQ(proxy_wait_complete_before(ring.view, t.sequence + 1, patient()), proxy_status::ok);
          ASSERT_TRUE(proxy_is_complete(ring.view, t.sequence));
        }
      }
    });
  }
  proxy_ring_consumer consumer(ring.view);
  const std::uint64_t total = std::uint64_t{producers} * per_producer;
  std::vector<std::uint32_t> next_index(producers, 0);  // each producer's requests arrive in its order
  const auto deadline = clock_type::now() + kRunDeadline;
  std::uint64_t seen = 0;
  while (seen < total && clock_type::now() < deadline) {
    const std::optional<proxy_descriptor> d = consumer.poll();
    if (!d) {
      std::this_thread::yield();
      continue;
    }
    const proxy_decoded got = decode(*d);
    ASSERT_EQ(got.status, proxy_status::ok) << to_string(got.status);
    ASSERT_EQ(got.request.sequence, first + seen) << "consumed out of ticket order";
    const auto producer = static_cast<std::uint32_t>(got.request.local >> 32);
    const auto index = static_cast<std::uint32_t>(got.request.local);
    ASSERT_LT(producer, producers);
    ASSERT_EQ(index, next_index[producer]) << "lost, duplicated or reordered request of producer " << producer;
    ++next_index[producer];
    ASSERT_EQ(consumer.complete(got.request.sequence), proxy_status::ok);
    ++seen;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(seen, total);
  for (unsigned p = 0; p < producers; ++p) EXPECT_EQ(next_index[p], per_producer);
  EXPECT_FALSE(consumer.poll().has_value()) << "a request beyond the last one posted";
  EXPECT_EQ(consumer.completed(), first + total);
  EXPECT_TRUE(proxy_complete_before(ring.view, first + total));
  if (waited != nullptr)
    for (auto w : waits) *waited += w;
}

TEST(ProxyRing, ManyProducersEachRequestOnceInOrder) {
  for (unsigned producers : {1u, 2u, 4u, 8u}) {
    SCOPED_TRACE(producers);
    test_ring ring(64, 64, 1);
    run_producers(ring, producers, 2000 / producers + 500, 0);
  }
}

TEST(ProxyRing, FullRingBlocksProducersUntilCredits) {
  test_ring ring(4, 4, 1);
  std::uint64_t waited = 0;
  run_producers(ring, 4, 800, 0, false, &waited);
  EXPECT_GT(waited, 0u) << "with 4 slots and 4 producers someone must have waited for credits";
}

TEST(ProxyRing, FullRingWithoutConsumerRefusesAndStalls) {
  test_ring ring(4, 4, 1);
  for (unsigned i = 0; i < 4; ++i)
    ASSERT_EQ(proxy_post(ring.view, tagged_put(0, i), abort_now).status, proxy_status::ok);
  const proxy_ticket fifth = proxy_post(ring.view, tagged_put(0, 4), abort_now);
  EXPECT_EQ(fifth.status, proxy_status::aborted) << "no credit for a fifth descriptor";
  EXPECT_EQ(fifth.sequence, 4u);
  // The failed ticket is a hole: the consumer gets the four published requests and then waits at it.
  proxy_ring_consumer consumer(ring.view);
  for (unsigned i = 0; i < 4; ++i) ASSERT_TRUE(consumer.poll().has_value());
  EXPECT_FALSE(consumer.poll().has_value());
}

TEST(ProxyRing, WrapsAroundManyTimesAcrossTheSequenceWrap) {
  // 8 slots, 40000 requests: 5000 laps, and the tickets cross 2^64 on the way.
  const std::uint64_t first = ~std::uint64_t{0} - 20000;
  test_ring ring(8, 8, 1, first);
  run_producers(ring, 2, 20000, first, /*quiet_every_16=*/true);
}

TEST(ProxyRing, InvalidRequestTakesNoTicket) {
  test_ring ring(4, 4, 1);
  const proxy_ticket t = proxy_post(ring.view, {.op = proxy_op::put, .pe = -1}, abort_now);
  EXPECT_EQ(t.status, proxy_status::bad_pe);
  EXPECT_EQ(proxy_issued(ring.view), 0u);
  ASSERT_EQ(proxy_post(ring.view, tagged_put(0, 0), abort_now).status, proxy_status::ok);
  proxy_ring_consumer consumer(ring.view);
  const auto d = consumer.poll();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(decode(*d).request.sequence, 0u);
}

// Single-threaded and exhaustive: after each completion in a shuffled order, every quiet-style and
// per-request predicate (and the waits, polled once) must match a model, over several rounds so the done
// words are reused and the sequences cross 2^64.
TEST(ProxyRing, OutOfOrderCompletionReleasesExactlyTheEarlierWaits) {
  constexpr std::uint32_t kCapacity = 32, kWindow = 128, kRounds = 4;
  const std::uint64_t first = ~std::uint64_t{0} - 300;
  test_ring ring(kCapacity, kWindow, 16, first);
  proxy_ring_consumer consumer(ring.view);
  std::mt19937 rng(5);
  std::uint64_t base = first;
  for (unsigned round = 0; round < kRounds; ++round) {
    // Post and consume a whole window; some requests are fetching atomics with a result slot.
    std::vector<proxy_request> posted;
    while (posted.size() < kWindow) {
      proxy_request r = tagged_put(0, static_cast<std::uint32_t>(posted.size()));
      if (posted.size() % 8 == 3) {
        r = {.op = proxy_op::atomic,
             .atomic_op = proxy_atomic_op::fetch_add,
             .atomic_type = proxy_atomic_type::int64,
             .pe = 2,
             .completion = static_cast<std::uint32_t>(posted.size() / 8 % 16),
             .remote_offset = 8,
             .value = 1};
      }
      ASSERT_EQ(proxy_post(ring.view, r, abort_now).status, proxy_status::ok);
      posted.push_back(r);
      ASSERT_TRUE(consumer.poll().has_value());
    }
    // The window is full: a published request waits until the oldest completes.
    ASSERT_EQ(proxy_post(ring.view, tagged_put(1, round), abort_now).status, proxy_status::ok);
    EXPECT_TRUE(consumer.window_full());
    EXPECT_FALSE(consumer.poll().has_value());
    EXPECT_EQ(consumer.complete(base + kWindow), proxy_status::completion_invalid) << "not consumed yet";

    std::vector<std::uint32_t> order(kWindow);
    for (std::uint32_t i = 0; i < kWindow; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<bool> done(kWindow, false);
    for (std::uint32_t step = 0; step < kWindow; ++step) {
      const std::uint32_t i = order[step];
      const std::uint64_t s = base + i;
      const proxy_request& r = posted[i];
      if (r.op == proxy_op::atomic) {
        ASSERT_EQ(consumer.complete(s, r.completion, 1000 + s), proxy_status::ok);
        ASSERT_EQ(proxy_wait_complete(ring.view, s, abort_now), proxy_status::ok);
        EXPECT_EQ(proxy_result(ring.view, r.completion), 1000 + s);
      } else {
        ASSERT_EQ(consumer.complete(s), proxy_status::ok);
      }
      EXPECT_EQ(consumer.complete(s), proxy_status::completion_invalid) << "completed twice";
      done[i] = true;
      // Model: the watermark is the first incomplete request.
      std::uint32_t prefix = 0;
      while (prefix < kWindow && done[prefix]) ++prefix;
      EXPECT_EQ(consumer.completed(), base + prefix);
      for (std::uint32_t k = 0; k <= kWindow; ++k) {
        const bool all_before = k <= prefix;
        ASSERT_EQ(proxy_complete_before(ring.view, base + k), all_before) << "round " << round << " step " << step;
        if (k < kWindow) {
          ASSERT_EQ(proxy_is_complete(ring.view, base + k), bool(done[k])) << k;
        }
      }
      // Requests of the previous round stay complete although their done words are reused.
      if (round > 0) {
        EXPECT_TRUE(proxy_is_complete(ring.view, base - 1 - rng() % kWindow));
      }
      const std::uint64_t probe = base + rng() % (kWindow + 1);
      EXPECT_EQ(proxy_wait_complete_before(ring.view, probe, abort_now) == proxy_status::ok,
                proxy_seq_diff(probe, base + prefix) <= 0);
    }
    EXPECT_EQ(consumer.completed(), base + kWindow);
    // The extra request is consumable now; complete it so the next round starts clean.
    const auto extra = consumer.poll();
    ASSERT_TRUE(extra.has_value());
    ASSERT_EQ(consumer.complete(decode(*extra).request.sequence), proxy_status::ok);
    base += kWindow + 1;
  }
  EXPECT_EQ(consumer.complete(first), proxy_status::completion_invalid) << "long complete";
}

// Producers wait, quiet-style, on their own last ticket while the proxy completes in shuffled batches;
// when a wait returns, every earlier request (anyone's) must have been completed already.
TEST(ProxyRing, SequenceBarrierUnderShuffledCompletion) {
  constexpr unsigned kProducers = 4, kPerProducer = 400, kBatch = 10;
  constexpr std::uint64_t kTotal = kProducers * kPerProducer;
  test_ring ring(64, 64, 1);
  auto completed_flag = std::make_unique<std::atomic<bool>[]>(kTotal);
  std::atomic<int> early{0};
  std::vector<std::thread> threads;
  for (unsigned p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (unsigned i = 0; i < kPerProducer; ++i) {
        const proxy_ticket t = proxy_post(ring.view, tagged_put(p, i), patient());
        ASSERT_EQ(t.status, proxy_status::ok);
        if (i % kBatch != kBatch - 1) continue;
        ASSERT_EQ(proxy_wait_complete_before(ring.view, t.sequence + 1, patient()), proxy_status::ok);
        for (std::uint64_t s = 0; s <= t.sequence; ++s) {
          if (!completed_flag[s].load(std::memory_order_relaxed)) early.fetch_add(1);
        }
      }
    });
  }
  proxy_ring_consumer consumer(ring.view);
  std::mt19937 rng(9);
  std::vector<std::uint64_t> pending;
  const auto deadline = clock_type::now() + kRunDeadline;
  while (consumer.completed() < kTotal && clock_type::now() < deadline) {
    const auto d = consumer.poll();
    if (d) pending.push_back(decode(*d).request.sequence);
    // Complete a shuffled part of what is pending when idle or when a batch has built up.
    if ((!d && !pending.empty()) || pending.size() >= 24) {
      std::shuffle(pending.begin(), pending.end(), rng);
      const std::size_t n = d ? pending.size() / 2 : pending.size();
      for (std::size_t k = 0; k < n; ++k) {
        completed_flag[pending.back()].store(true, std::memory_order_relaxed);
        ASSERT_EQ(consumer.complete(pending.back()), proxy_status::ok);
        pending.pop_back();
      }
    }
    if (!d) std::this_thread::yield();
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(consumer.completed(), kTotal);
  EXPECT_EQ(early.load(), 0) << "a quiet-style wait returned before an earlier request completed";
}

TEST(ProxyRing, StoppedConsumerFailsEveryWaitPromptly) {
  test_ring ring(4, 4, 1);
  proxy_ring_consumer consumer(ring.view);
  for (unsigned i = 0; i < 4; ++i)
    ASSERT_EQ(proxy_post(ring.view, tagged_put(0, i), abort_now).status, proxy_status::ok);
  ASSERT_TRUE(consumer.poll().has_value());  // request 0 consumed, never completed
  ASSERT_EQ(proxy_post(ring.view, tagged_put(0, 4), abort_now).status, proxy_status::ok);

  // A producer blocked on credits and one blocked on completion, both with a long deadline.
  std::atomic<int> finished{0};
  proxy_status blocked_post = proxy_status::ok, blocked_quiet = proxy_status::ok;
  std::thread poster([&] {
    blocked_post = proxy_post(ring.view, tagged_put(0, 5), patient()).status;
    finished.fetch_add(1);
  });
  std::thread quieter([&] {
    blocked_quiet = proxy_wait_complete_before(ring.view, 1, patient());
    finished.fetch_add(1);
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(finished.load(), 0) << "nothing can proceed while the proxy sits idle";
  consumer.stop();
  poster.join();
  quieter.join();
  // Their deadlines are far off: had the stop not reached them, they would have returned aborted then.
  EXPECT_EQ(blocked_post, proxy_status::consumer_stopped);
  EXPECT_EQ(blocked_quiet, proxy_status::consumer_stopped);
  EXPECT_FALSE(consumer.poll().has_value()) << "a stopped consumer consumes nothing";
  EXPECT_EQ(proxy_wait_complete(ring.view, 0, patient()), proxy_status::consumer_stopped);
}

TEST(ProxyRing, SilentConsumerFailsAtTheDeadline) {
  // A proxy that died without stopping: only the caller's abort callback ends the wait. The callback gives
  // up on its n-th call, so a wait that returns aborted after exactly n calls kept polling until then.
  test_ring ring(4, 4, 1);
  for (unsigned i = 0; i < 4; ++i)
    ASSERT_EQ(proxy_post(ring.view, tagged_put(0, i), abort_now).status, proxy_status::ok);
  for (std::uint64_t n : {1u, 7u, 300u}) {
    std::uint64_t calls = 0;
    auto give_up_at_n = [&](std::uint64_t) { return ++calls >= n; };
    EXPECT_EQ(proxy_post(ring.view, tagged_put(0, 4), give_up_at_n).status, proxy_status::aborted);
    EXPECT_EQ(calls, n) << "post: no credit comes back, so only the callback ends the wait";
    calls = 0;
    EXPECT_EQ(proxy_wait_complete_before(ring.view, 4, give_up_at_n), proxy_status::aborted);
    EXPECT_EQ(calls, n) << "wait: nothing completes, so only the callback ends the wait";
  }
}

}  // namespace
}  // namespace shoal::detail
