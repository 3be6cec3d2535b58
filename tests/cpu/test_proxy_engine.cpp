// The proxy engine over the loopback network, N = 2 and 4 PEs in one process: producer threads on every PE
// post random mixes of put, get, put_signal, signal and atomics to random peers (themselves included) and
// quiet; every byte of every target and every atomic result is checked against a model. Plus transfers
// of many chunks at odd sizes and offsets, and put_signal's order seen from a thread polling the signal.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "proxy_mix_model.hpp"
#include "test_proxy_engine_job.hpp"

namespace shoal::detail::engine_test {
namespace {

// ---- the random mix ----

struct mix_case {
  int n_pes;
  bool reorder;
  std::uint64_t first_sequence;
};

class ProxyEngineMix : public ::testing::TestWithParam<mix_case> {};

TEST_P(ProxyEngineMix, RandomRequestsMatchTheModel) {
  const mix_case c = GetParam();
  const mix_layout layout{c.n_pes};
  job_options o{.n_pes = c.n_pes,
                .heap_bytes = layout.heap_bytes(),
                .first_sequence = c.first_sequence,
                .network = {.reorder_completions = c.reorder, .seed = 7},
                .engine = {.chunk_bytes = 3000, .peer_window_bytes = 7000},
                .seed = 11u + unsigned(c.n_pes)};
  engine_job job(o);
  for (int p = 0; p < c.n_pes; ++p) {
    std::memset(job[p].base() + kCounter32, 0, 4);
    std::memcpy(job[p].base() + kCounter64, &kCounter64Start, 8);
  }
  job.start();
  // One process: after every round, each producer's slice on every PE is compared with its model.
  auto heap_of = [&job](int t) {
    return std::vector<std::byte>(job[t].base(), job[t].base() + job[t].heap.size() * sizeof(std::uint64_t));
  };
  auto check_slice = [&job](int t, std::uint64_t offset, const std::vector<std::byte>& model) {
    for (std::uint64_t b = 0; b < model.size(); ++b)
      if (job[t].base()[offset + b] != model[b]) {
        ADD_FAILURE() << "byte " << b << " of the slice at " << offset << " on PE " << t;
        return;
      }
  };
  std::vector<std::unique_ptr<mix_producer>> producers;
  for (int p = 0; p < c.n_pes; ++p)
    for (int t = 0; t < kProducers; ++t)
      producers.push_back(
          std::make_unique<mix_producer>(job[p], p, c.n_pes, t, 1000u * p + t + 1, heap_of, check_slice));
  std::vector<std::thread> threads;
  const int rounds = c.n_pes == 2 ? 30 : 15;
  for (auto& pr : producers) threads.emplace_back([&pr, rounds] { pr->run(rounds, 16); });
  for (auto& t : threads) t.join();
  job.stop_all();
  for (const auto& pr : producers) ASSERT_FALSE(pr->failed());

  std::map<int, std::vector<std::uint64_t>> by_target32, by_target64;
  for (const auto& pr : producers)
    for (const count_record& r : pr->counts()) (r.wide ? by_target64 : by_target32)[int(r.target)].push_back(r.old);

  // Every fetch_add on a counter returned a distinct old value: together exactly start .. start + n - 1.
  for (int t = 0; t < c.n_pes; ++t) {
    for (const bool wide : {false, true}) {
      std::vector<std::uint64_t> got = (wide ? by_target64 : by_target32)[t];
      std::sort(got.begin(), got.end());
      const std::uint64_t start = wide ? kCounter64Start : 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], start + i) << (wide ? "64" : "32") << "-bit counter of PE " << t;
      const std::uint64_t final_value =
          wide ? job[t].load<std::uint64_t>(kCounter64) : job[t].load<std::uint32_t>(kCounter32);
      EXPECT_EQ(final_value, start + got.size()) << "PE " << t;
    }
  }
  std::uint64_t requests = 0;
  for (int p = 0; p < c.n_pes; ++p) requests += job[p].engine->counters().requests;
  EXPECT_GT(requests, std::uint64_t(c.n_pes) * kProducers * rounds);
}

INSTANTIATE_TEST_SUITE_P(Pes, ProxyEngineMix,
                         ::testing::Values(mix_case{2, false, 0}, mix_case{2, true, ~std::uint64_t{0} - 300},
                                           mix_case{4, false, 5}, mix_case{4, true, 0}),
                         [](const auto& info) {
                           return fmt::format("np{}{}{}", info.param.n_pes, info.param.reorder ? "_reordered" : "",
                                              info.param.first_sequence > (std::uint64_t{1} << 63) ? "_wrap" : "");
                         });

// ---- large transfers ----

// Default 1 MiB chunks: puts and gets of several MiB at odd sizes and offsets, heap and address buffers,
// between two PEs and to the PE itself. The chunk count is part of the check. With lent payload buffers
// (fewer than a window's worth in both directions, so some payloads fall back to ordinary memory), every
// buffer must also come back; with deferred flushes, several batches wait for theirs at once; with payload
// windows, payloads between the two PEs travel by reference (read in the sender's window) and every one
// of them is returned.
struct large_transfer_case {
  std::size_t lend_slots;
  bool deferred_flushes;
  bool windows = false;
};
class LargeTransfers : public ::testing::TestWithParam<large_transfer_case> {};

TEST_P(LargeTransfers, SpanManyChunksAtOddSizesAndOffsets) {
  constexpr std::uint64_t kHeap = 24ull << 20;
  const std::size_t lend_slots = GetParam().lend_slots;
  engine_job job({.n_pes = 2,
                  .heap_bytes = kHeap,
                  .lend_slots = lend_slots,
                  .deferred_flushes = GetParam().deferred_flushes,
                  .windows = GetParam().windows,
                  .seed = 5});
  job.start();
  std::mt19937_64 rng(99);
  struct transfer {
    int target;
    std::uint64_t remote, local, size;
    bool address;
  };
  const transfer cases[] = {{1, 7, (12ull << 20) + 1, (5ull << 20) + 13, false},
                            {1, (3ull << 20) + 5, 0, 3 * kProxyChunkBytes, true},
                            {0, 1, (18ull << 20) + 3, (4ull << 20) - 1, false},
                            {1, (9ull << 20) + 11, 0, kProxyChunkBytes + 1, true}};
  for (const transfer& c : cases) {
    SCOPED_TRACE(fmt::format("{} bytes to PE {} at {}", c.size, c.target, c.remote));
    std::vector<std::byte> source = random_bytes(rng, c.size);
    std::vector<std::byte> back(c.size);
    const std::uint64_t chunks_before = job[0].engine->counters().data_chunks;
    // Address buffers here are host vectors, marked as such (as the GPU path's host forms mark theirs).
    proxy_request put{.op = proxy_op::put,
                      .local_is_address = c.address,
                      .local_is_host = c.address,
                      .pe = c.target,
                      .remote_offset = c.remote,
                      .local = c.address ? reinterpret_cast<std::uintptr_t>(source.data()) : c.local,
                      .size = c.size};
    if (!c.address) std::memcpy(job[0].base() + c.local, source.data(), c.size);
    ASSERT_EQ(proxy_host_call(job[0].ring, put, kPatience).status, proxy_status::ok);
    ASSERT_EQ(0, std::memcmp(job[c.target].base() + c.remote, source.data(), c.size));
    // Get it back, shifted by one byte, into the other kind of buffer.
    proxy_request get{.op = proxy_op::get,
                      .local_is_address = !c.address,
                      .local_is_host = !c.address,
                      .pe = c.target,
                      .remote_offset = c.remote + 1,
                      .size = c.size - 1};
    get.local = !c.address ? reinterpret_cast<std::uintptr_t>(back.data()) : (16ull << 20) + 5;
    ASSERT_EQ(proxy_host_call(job[0].ring, get, kPatience).status, proxy_status::ok);
    const std::byte* got = !c.address ? back.data() : job[0].base() + get.local;
    ASSERT_EQ(0, std::memcmp(got, source.data() + 1, c.size - 1));
    const std::uint64_t expected_chunks =
        (c.size + kProxyChunkBytes - 1) / kProxyChunkBytes + (c.size - 1 + kProxyChunkBytes - 1) / kProxyChunkBytes;
    EXPECT_EQ(job[0].engine->counters().data_chunks - chunks_before, expected_chunks);
  }
  // PE 1 answers this only after its engine ran the completions of every send before it, so the payloads
  // it lent for its get replies are back too.
  proxy_request signal{
      .op = proxy_op::signal, .signal_op = proxy_signal_op::add, .pe = 1, .value = 1, .signal_offset = 0};
  ASSERT_EQ(proxy_host_call(job[0].ring, signal, kPatience).status, proxy_status::ok);
  job.stop_all();
  for (int pe = 0; pe < 2; ++pe) {
    EXPECT_EQ(job[pe].memory->lent_out(), 0u) << "PE " << pe;
    if (lend_slots != 0) {
      EXPECT_GT(job[pe].memory->lends(), 0u) << "PE " << pe;
    }
    // PE 0's puts reach PE 1 by reference, and PE 1's get replies reach PE 0 so.
    EXPECT_EQ(job[pe].engine->counters().borrowed > 0, GetParam().windows) << "PE " << pe;
  }
}

INSTANTIATE_TEST_SUITE_P(ProxyEngine, LargeTransfers,
                         ::testing::Values(large_transfer_case{0, false}, large_transfer_case{6, false},
                                           large_transfer_case{6, true}, large_transfer_case{6, true, true}),
                         [](const auto& info) {
                           return std::string(info.param.lend_slots == 0 ? "OwnMemory" : "LentBuffers") +
                                  (info.param.deferred_flushes ? "DeferredFlushes" : "") +
                                  (info.param.windows ? "Windows" : "");
                         });

// ---- data in the descriptor ----

// Puts and put_signals of 0 to 8 bytes whose data rides in the descriptor (local_is_inline, as kernels post
// them) land byte-exact at odd offsets, to the peer and to the PE itself, and leave the bytes around them
// alone; the signal of a put_signal lands too. `chunk_bytes` below 8 cuts the inline data into chunks too:
// each must carry its own part of it.
void check_inline_puts(std::uint64_t chunk_bytes) {
  engine_job job({.n_pes = 2, .heap_bytes = 1 << 16, .engine = {.chunk_bytes = chunk_bytes}, .seed = 8});
  job.start();
  std::mt19937_64 rng(21);
  for (int target : {1, 0}) {
    for (std::uint64_t size = 0; size <= kProxyMaxInlineBytes; ++size) {
      SCOPED_TRACE(fmt::format("{} bytes to PE {}", size, target));
      const std::uint64_t at = 1001 + 37 * size, signal = 8 * (100 + size);
      const std::uint64_t data = rng() & proxy_field_mask(unsigned(8 * size));
      std::vector<std::byte> before(size + 2);
      std::memcpy(before.data(), job[target].base() + at - 1, before.size());
      const std::uint64_t signal_before = job[target].load<std::uint64_t>(signal);
      proxy_request r{.op = size % 2 == 0 ? proxy_op::put_signal : proxy_op::put,
                      .local_is_inline = true,
                      .pe = target,
                      .remote_offset = at,
                      .local = data,
                      .size = size};
      if (r.op == proxy_op::put_signal) {
        r.signal_op = proxy_signal_op::add;
        r.value = 5;
        r.signal_offset = signal;
      }
      ASSERT_EQ(proxy_host_call(job[0].ring, r, kPatience).status, proxy_status::ok);
      std::vector<std::byte> want = before;
      std::memcpy(want.data() + 1, &data, size);
      EXPECT_EQ(0, std::memcmp(job[target].base() + at - 1, want.data(), want.size()));
      if (r.op == proxy_op::put_signal) {
        EXPECT_EQ(job[target].load_atomic(signal), signal_before + 5);
      }
    }
  }
  job.stop_all();
}

TEST(ProxyEngine, InlinePutsLandExactly) { check_inline_puts(kProxyChunkBytes); }

// Chunks of 3 and 1 bytes: an 8-byte inline put travels as 3 + 3 + 2 (or 8 x 1) put_data messages. Each
// used to carry the first bytes of the data again.
TEST(ProxyEngine, InlinePutsCutIntoSmallChunksLandExactly) {
  for (const std::uint64_t chunk_bytes : {std::uint64_t{3}, std::uint64_t{1}}) {
    SCOPED_TRACE(fmt::format("chunks of {} bytes", chunk_bytes));
    check_inline_puts(chunk_bytes);
  }
}

// ---- put_signal order ----

// PE 0 put_signals rounds of data (hundreds of small chunks, several round trips each) to PE 1 and adds 1
// to a signal word; a thread on PE 1's side polls the word and, each time it moves, checks that the whole
// of that round's data is already there. The producer starts the next round once the poller has checked.
TEST(ProxyEngine, PutSignalNeverShowsTheSignalBeforeTheData) {
  for (const bool reorder : {false, true}) {
    SCOPED_TRACE(reorder ? "reordered completions" : "in-order completions");
    constexpr std::uint64_t kSignal = 0;
    constexpr std::uint64_t kData = 64;
    constexpr std::uint64_t kMax = 200000;
    // Reordered completions come with late flushes: several batches wait for theirs at once.
    engine_job job({.n_pes = 2,
                    .heap_bytes = 2 * (kData + kMax),
                    .network = {.reorder_completions = reorder},
                    .engine = {.chunk_bytes = 1024, .peer_window_bytes = 8192},
                    .deferred_flushes = reorder,
                    .seed = 3});
    std::memset(job[1].base() + kSignal, 0, 8);
    job.start();
    constexpr int kRounds = 40;
    auto round_data = [](int k) {
      std::mt19937_64 rng(k * 7919u + 1);
      const std::uint64_t n = kMax / 2 + rng() % (kMax / 2);
      const std::uint64_t at = rng() % (kMax - n + 1);
      return std::pair{at, random_bytes(rng, n)};
    };
    std::atomic<int> checked{0};
    std::atomic<bool> failed{false};
    std::thread poller([&] {
      const auto until = std::chrono::steady_clock::now() + kPatience;
      std::atomic_ref<std::uint64_t> signal(*reinterpret_cast<std::uint64_t*>(job[1].base() + kSignal));
      for (int k = 1; k <= kRounds && !failed; ++k) {
        std::uint64_t seen;
        while ((seen = signal.load(std::memory_order_acquire)) < std::uint64_t(k)) {
          if (std::chrono::steady_clock::now() > until) {
            ADD_FAILURE() << "signal " << k << " never came";
            failed = true;
            return;
          }
          std::this_thread::yield();
        }
        if (seen != std::uint64_t(k)) {
          ADD_FAILURE() << "signal " << seen << " while waiting for " << k;
          failed = true;
          return;
        }
        const auto [at, data] = round_data(k);
        if (std::memcmp(job[1].base() + kData + at, data.data(), data.size()) != 0) {
          ADD_FAILURE() << "round " << k << ": signal seen before all of its " << data.size() << " bytes";
          failed = true;
          return;
        }
        checked.store(k, std::memory_order_release);
      }
    });
    for (int k = 1; k <= kRounds && !failed; ++k) {
      const auto [at, data] = round_data(k);
      proxy_request r{.op = proxy_op::put_signal,
                      .signal_op = proxy_signal_op::add,
                      .local_is_address = true,
                      .pe = 1,
                      .remote_offset = kData + at,
                      .local = reinterpret_cast<std::uintptr_t>(data.data()),
                      .size = data.size(),
                      .value = 1,
                      .signal_offset = kSignal};
      ASSERT_EQ(proxy_host_call(job[0].ring, r, kPatience).status, proxy_status::ok);
      const auto until = std::chrono::steady_clock::now() + kPatience;
      while (checked.load(std::memory_order_acquire) < k && !failed && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    }
    poller.join();
    EXPECT_EQ(checked.load(), kRounds);
    job.stop_all();
  }
}

// ---- quiet ----

// Many non-blocking puts from three threads of PE 0 to PEs 1..3, with completions held back and reordered
// and small chunks; one quiet; then everything before it is complete and in place. Twice: waiting as the
// host helper does (every request before the quiet complete, the ring's watermark) and waiting for the
// quiet request itself, which the engine completes only after everything before it.
TEST(ProxyEngine, QuietWaitsForEverythingBeforeIt) {
  for (const bool wait_for_quiet_itself : {false, true}) {
    SCOPED_TRACE(wait_for_quiet_itself ? "waiting for the quiet request" : "waiting for all before the quiet");
    engine_job job({.n_pes = 4,
                    .heap_bytes = 1 << 20,
                    .ring = {.capacity = 32, .window = 64, .result_slots = 8},
                    .network = {.reorder_completions = true, .seed = 3},
                    .engine = {.chunk_bytes = 512, .peer_window_bytes = 1536},
                    .seed = 8});
    job.start();
    constexpr int kThreads = 3;
    constexpr int kPuts = 60;
    constexpr std::uint64_t kBlock = 2000;  // per (thread, put): its own range on the target
    std::vector<std::vector<std::byte>> sources(kThreads * kPuts);
    std::vector<std::uint64_t> tickets(kThreads * kPuts);
    std::mt19937_64 rng(1);
    for (auto& s : sources) s = random_bytes(rng, 1 + rng() % kBlock);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPuts; ++i) {
          const int idx = t * kPuts + i;
          proxy_request r{.op = proxy_op::put,
                          .local_is_address = true,
                          .pe = 1 + idx % 3,
                          .remote_offset = std::uint64_t(idx) * kBlock,
                          .local = reinterpret_cast<std::uintptr_t>(sources[idx].data()),
                          .size = sources[idx].size()};
          const proxy_host_result res = proxy_host_post(job[0].ring, r, kPatience);
          ASSERT_EQ(res.status, proxy_status::ok);
          tickets[idx] = res.sequence;
        }
      });
    for (auto& th : threads) th.join();
    const proxy_request quiet{.op = proxy_op::quiet, .pe = kProxyAllPes};
    if (wait_for_quiet_itself) {
      const proxy_host_result q = proxy_host_post(job[0].ring, quiet, kPatience);
      ASSERT_EQ(q.status, proxy_status::ok);
      ASSERT_EQ(proxy_wait_complete(job[0].ring, q.sequence, proxy_host_deadline::after(kPatience)), proxy_status::ok);
    } else {
      ASSERT_EQ(proxy_host_call(job[0].ring, quiet, kPatience).status, proxy_status::ok);
    }
    for (int idx = 0; idx < kThreads * kPuts; ++idx) {
      EXPECT_TRUE(proxy_is_complete(job[0].ring, tickets[idx]));
      ASSERT_EQ(0, std::memcmp(job[1 + idx % 3].base() + std::uint64_t(idx) * kBlock, sources[idx].data(),
                               sources[idx].size()))
          << "put " << idx;
    }
    job.stop_all();
  }
}

}  // namespace
}  // namespace shoal::detail::engine_test
