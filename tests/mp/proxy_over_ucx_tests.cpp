// Multi-process tests of the proxy engine (transport/proxy_engine.hpp) over the UCX network, moving host
// memory: ProxyOverUcx runs on every PE of a job started by shoalrun (2 and 4 PEs, each over UCX_TLS=tcp
// and over shared memory). Each PE has a host heap (host_local_memory), a ring in ordinary host memory and
// an engine, made as the one-process CPU tests make theirs (tests/cpu/test_proxy_engine_job.hpp), but with
// make_ucx_network instead of a loopback fabric. Host producer threads post through proxy_engine_host.hpp.
//
// Nothing here can read a peer's memory, so each check is made where the data is: every writer owns a
// region of every heap that only it writes, keeps a model of it, and after a bootstrap barrier hands the
// model to the owner (bootstrap alltoall), who compares it with its heap byte for byte. Fetched values are
// gathered through the bootstrap. Every wait has a deadline (kPatience, SHOAL_BOOTSTRAP_TIMEOUT); checks
// are non-fatal where a PE must still reach the next collective.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../cpu/proxy_mix_model.hpp"
#include "../cpu/test_proxy_engine_job.hpp"
#include "network_test_util.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"

namespace shoal_mp {
namespace {

using namespace shoal::detail;
using engine_test::job_options;
using engine_test::job_pe;
using engine_test::kPatience;
using engine_test::random_bytes;
using namespace engine_test;  // the mix layout and atomic model (proxy_mix_model.hpp)

std::unique_ptr<shoal::bootstrap> g_proxy_boot;  // this suite's own bootstrap

// The seed of PE `pe`'s initial heap bytes, so that any PE can compute them (initial_heap).
std::uint64_t heap_seed(const job_options& o, int pe) { return o.seed * 1000 + std::uint64_t(pe); }

// PE `pe`'s heap as make_job_pe filled it.
std::vector<std::byte> initial_heap(const job_options& o, int pe) {
  std::mt19937_64 rng(heap_seed(o, pe));
  std::vector<std::uint64_t> words((o.heap_bytes + 7) / 8);
  for (auto& w : words) w = rng();
  std::vector<std::byte> out(o.heap_bytes);
  std::memcpy(out.data(), words.data(), out.size());
  return out;
}

// This PE's part of a job of engines over UCX. Collective: every PE constructs it, and finish()es it, in
// the same order. Peers send only after start()'s barrier, when every engine runs; finish() stops this
// engine only after a barrier that every PE reaches after its last quiet, so no peer still needs it.
class ucx_engine_job {
 public:
  ucx_engine_job(shoal::bootstrap& boot, const job_options& o) : boot_(boot), options_(o) {
    std::mt19937_64 rng(heap_seed(o, boot.pe()));
    pe_ = engine_test::make_job_pe(o, rng);
    pe_->net = make_ucx_network(boot);
    if (o.windows) engine_test::open_payload_windows(*pe_, o);
    pe_->engine = std::make_unique<proxy_engine>(pe_->ring, *pe_->net, *pe_->memory, limits(), o.engine);
  }
  ~ucx_engine_job() {
    try {
      finish();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "finishing the job: " << e.what();
    }
  }

  proxy_limits limits() const {
    return {.n_pes = boot_.n_pes(), .heap_bytes = options_.heap_bytes, .completion_slots = options_.ring.result_slots};
  }
  void start() {
    pe_->engine->start();
    boot_.barrier();
  }
  // While the engines run they progress their networks themselves: a plain bootstrap barrier is safe.
  void barrier() { boot_.barrier(); }

  // Barrier, stop and destroy the engine (a failure it recorded fails the test), then a barrier with this
  // thread progressing the network, then close it: nobody closes while another still needs it. Once.
  void finish() {
    if (!pe_->net) return;
    boot_.barrier();
    try {
      pe_->engine->stop();
    } catch (const shoal::error& e) {
      ADD_FAILURE() << "engine of PE " << boot_.pe() << ": " << e.what();
    }
    pe_->engine.reset();
    with_progress(*pe_->net, [this] { boot_.barrier(); });
    pe_->net.reset();
  }

  shoal::bootstrap& boot() { return boot_; }
  const job_options& options() const { return options_; }
  job_pe& me() { return *pe_; }
  proxy_engine& engine() { return *pe_->engine; }
  int pe() const { return boot_.pe(); }
  int n_pes() const { return boot_.n_pes(); }

 private:
  shoal::bootstrap& boot_;
  job_options options_;
  std::unique_ptr<job_pe> pe_;
};

class ProxyOverUcx : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!ucx_network_available()) return;
    if (!g_proxy_boot) g_proxy_boot = shoal::make_bootstrap_from_env();
  }
  static void TearDownTestSuite() { g_proxy_boot.reset(); }
  void SetUp() override {
    if (!ucx_network_available()) GTEST_SKIP() << "no UCX in this build: " << describe_ucx_network();
  }
  shoal::bootstrap& boot() { return *g_proxy_boot; }
};

// ---- the random mix ----


// Hands every producer's model of its slice on PE q to PE q, which compares it with its heap.
void check_slices_at_their_owners(ucx_engine_job& job, const std::vector<std::unique_ptr<mix_producer>>& producers) {
  const int n = job.n_pes();
  const std::size_t block = kProducers * kSliceBytes;  // what one PE sends one PE
  std::vector<std::byte> send(block * n), recv(block * n);
  for (int q = 0; q < n; ++q)
    for (int k = 0; k < kProducers; ++k)
      std::memcpy(send.data() + q * block + k * kSliceBytes, producers[k]->models()[q].data(), kSliceBytes);
  job.boot().alltoall(send.data(), recv.data(), block);
  const mix_layout layout{n};
  for (int p = 0; p < n; ++p)
    for (int k = 0; k < kProducers; ++k) {
      const std::byte* want = recv.data() + p * block + k * kSliceBytes;
      const std::byte* got = job.me().base() + layout.slice(p, k);
      std::size_t b = 0;
      while (b < kSliceBytes && got[b] == want[b]) ++b;
      EXPECT_EQ(b, kSliceBytes) << "PE " << job.pe() << ": byte " << b << " of the slice of PE " << p
                                << " producer " << k << " differs from its writer's model";
    }
}

// Gathers every PE's fetch_adds; the old values returned on each counter must be exactly start .. start +
// n - 1, and (checked by the counter's owner) the counter must end at start + n.
void check_counters(ucx_engine_job& job, const std::vector<std::unique_ptr<mix_producer>>& producers) {
  std::vector<count_record> mine;
  for (const auto& pr : producers) mine.insert(mine.end(), pr->counts().begin(), pr->counts().end());
  const int n = job.n_pes();
  std::uint64_t my_count = mine.size();
  std::vector<std::uint64_t> counts(n);
  job.boot().all_gather(&my_count, counts.data(), sizeof my_count);
  const std::uint64_t most = *std::max_element(counts.begin(), counts.end());
  mine.resize(most, count_record{~0u, 0, 0});  // padding, ignored
  std::vector<count_record> all(most * n);
  if (most > 0) job.boot().all_gather(mine.data(), all.data(), most * sizeof(count_record));

  for (int t = 0; t < n; ++t)
    for (const bool wide : {false, true}) {
      std::vector<std::uint64_t> got;
      for (const count_record& c : all)
        if (c.target == std::uint32_t(t) && bool(c.wide) == wide) got.push_back(c.old);
      std::sort(got.begin(), got.end());
      const std::uint64_t start = wide ? kCounter64Start : 0;
      bool exact = true;
      for (std::size_t i = 0; i < got.size(); ++i) exact = exact && got[i] == start + i;
      EXPECT_TRUE(exact) << (wide ? "64" : "32") << "-bit counter of PE " << t << ": the " << got.size()
                         << " fetched values are not exactly start .. start + n - 1";
      if (t != job.pe()) continue;
      const std::uint64_t final_value =
          wide ? job.me().load<std::uint64_t>(kCounter64) : job.me().load<std::uint32_t>(kCounter32);
      EXPECT_EQ(final_value, start + got.size()) << "PE " << t << (wide ? " 64" : " 32") << "-bit counter";
    }
}

// Two producer threads per PE post random puts, gets, put_signals, signals, atomics of every op and type,
// shared-counter fetch_adds and fences to random PEs, with small chunks (3000 bytes, a 7000-byte window)
// so that most transfers take several chunks and round trips over UCX.
TEST_F(ProxyOverUcx, RandomRequestsFromEveryPeMatchTheModel) {
  const int n = boot().n_pes();
  const mix_layout layout{n};
  const job_options o{.n_pes = n, .heap_bytes = layout.heap_bytes(),
                      .engine = {.chunk_bytes = 3000, .peer_window_bytes = 7000}, .seed = 21};
  ucx_engine_job job(boot(), o);
  std::memset(job.me().base() + kCounter32, 0, 4);
  std::memcpy(job.me().base() + kCounter64, &kCounter64Start, 8);
  job.start();

  std::vector<std::unique_ptr<mix_producer>> producers;
  for (int k = 0; k < kProducers; ++k)
    producers.push_back(std::make_unique<mix_producer>(job.me(), job.pe(), job.n_pes(), k, 1000u * job.pe() + k + 1,
                                                       [&job](int t) { return initial_heap(job.options(), t); }));
  const int rounds = n == 2 ? 150 : 75;
  std::vector<std::thread> threads;
  for (auto& pr : producers) threads.emplace_back([&pr, rounds] { pr->run(rounds, 16); });
  for (auto& t : threads) t.join();
  job.barrier();  // every PE's last quiet is done: every slice and counter is final

  check_slices_at_their_owners(job, producers);
  check_counters(job, producers);
  const proxy_engine_counters c = job.engine().counters();
  EXPECT_GE(c.requests, std::uint64_t(kProducers) * rounds);
  EXPECT_GT(c.served, 0u);
  if (job.pe() == 0)
    std::printf("PE 0 over %s: %llu requests, %llu data chunks, %llu served, %llu messages sent\n",
                job.me().net->capabilities().transports.c_str(), (unsigned long long)c.requests,
                (unsigned long long)c.data_chunks, (unsigned long long)c.served, (unsigned long long)c.messages_sent);
  job.finish();
}

// ---- large transfers ----

// Default 1 MiB chunks. Every PE puts two blocks of several MiB at odd sizes and offsets to every PE (itself
// included), one from an address buffer and one from its heap, then gets them back shifted by a byte into
// the other kind of buffer; the chunk counts are part of the check, and each owner checks what landed.
constexpr std::uint64_t kBigSizes[] = {(2ull << 20) + 13, 3 * kProxyChunkBytes - 7};
constexpr std::uint64_t kBigSlot = 6ull << 20;  // per writer on every PE: both blocks and odd gaps
constexpr std::uint64_t kBigSource = 3ull << 20;
constexpr std::uint64_t kBigGetArea = 3ull << 20;

std::uint64_t big_seed(int from, int to, int block) {
  return (0xb16ull << 32) ^ (std::uint64_t(from) << 16) ^ (std::uint64_t(to) << 4) ^ std::uint64_t(block);
}
// Where block `block` from PE `from` lands on every PE: odd offsets in the writer's slot.
std::uint64_t big_offset(int from, int block) {
  return kBigSource + kBigGetArea + std::uint64_t(from) * kBigSlot + 5 + std::uint64_t(block) * (kBigSizes[0] + 3);
}

TEST_F(ProxyOverUcx, LargeTransfersSpanManyChunksAtOddSizesAndOffsets) {
  const int n = boot().n_pes();
  // Payloads travel in lent buffers where a few are free (UCX receives rendezvous data straight into
  // them), in the network's own memory where none is. The lent buffers are in payload windows: over
  // shared memory every peer reads them in place (by reference); over TCP none can.
  ucx_engine_job job(boot(), {.n_pes = n,
                              .heap_bytes = kBigSource + kBigGetArea + n * kBigSlot,
                              .lend_slots = 6,
                              .windows = true,
                              .seed = 22});
  job.start();
  job_pe& me = job.me();
  const std::uint64_t heap_source = 1;  // odd heap offsets for the heap-buffer block
  for (int t = 0; t < n; ++t) {
    SCOPED_TRACE("PE " + std::to_string(job.pe()) + " to PE " + std::to_string(t));
    std::vector<std::byte> from_vec(kBigSizes[0]);
    fill(from_vec, big_seed(job.pe(), t, 0));
    fill({me.base() + heap_source, kBigSizes[1]}, big_seed(job.pe(), t, 1));
    const std::uint64_t chunks_before = job.engine().counters().data_chunks;
    const proxy_request puts[] = {
        {.op = proxy_op::put, .local_is_address = true, .pe = t, .remote_offset = big_offset(job.pe(), 0),
         .local = reinterpret_cast<std::uintptr_t>(from_vec.data()), .size = kBigSizes[0]},
        {.op = proxy_op::put, .pe = t, .remote_offset = big_offset(job.pe(), 1), .local = heap_source,
         .size = kBigSizes[1]}};
    for (const proxy_request& r : puts) ASSERT_EQ(proxy_host_post(me.ring, r, kPatience).status, proxy_status::ok);
    ASSERT_EQ(proxy_host_quiet(me.ring, kPatience), proxy_status::ok);

    // Back, one byte in: block 0 into the heap's get area (odd offset), block 1 into a vector.
    std::vector<std::byte> into_vec(kBigSizes[1]);
    const std::uint64_t heap_get = kBigSource + 3;
    const proxy_request gets[] = {
        {.op = proxy_op::get, .pe = t, .remote_offset = big_offset(job.pe(), 0) + 1, .local = heap_get,
         .size = kBigSizes[0] - 1},
        {.op = proxy_op::get, .local_is_address = true, .pe = t, .remote_offset = big_offset(job.pe(), 1) + 1,
         .local = reinterpret_cast<std::uintptr_t>(into_vec.data()), .size = kBigSizes[1] - 1}};
    for (const proxy_request& r : gets) ASSERT_EQ(proxy_host_post(me.ring, r, kPatience).status, proxy_status::ok);
    ASSERT_EQ(proxy_host_quiet(me.ring, kPatience), proxy_status::ok);
    EXPECT_EQ(0, std::memcmp(me.base() + heap_get, from_vec.data() + 1, kBigSizes[0] - 1)) << "block 0 back";
    std::vector<std::byte> want1(kBigSizes[1]);
    fill(want1, big_seed(job.pe(), t, 1));
    EXPECT_EQ(0, std::memcmp(into_vec.data(), want1.data() + 1, kBigSizes[1] - 1)) << "block 1 back";

    std::uint64_t expected_chunks = 0;
    for (const std::uint64_t s : kBigSizes)
      expected_chunks += (s + kProxyChunkBytes - 1) / kProxyChunkBytes + (s - 1 + kProxyChunkBytes - 1) / kProxyChunkBytes;
    EXPECT_EQ(job.engine().counters().data_chunks - chunks_before, expected_chunks);
  }
  job.barrier();  // every PE's puts are complete: check what landed here
  for (int p = 0; p < n; ++p)
    for (int block = 0; block < 2; ++block) {
      std::vector<std::byte> want(kBigSizes[block]);
      fill(want, big_seed(p, job.pe(), block));
      const std::span<const std::byte> got(me.base() + big_offset(p, block), kBigSizes[block]);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()))
          << "block " << block << " from PE " << p << ": first difference at byte " << first_difference(got, want);
    }
  const std::string transports = me.net->capabilities().transports;
  const bool shared_memory = transports.find("sysv") != std::string::npos || transports.find("posix") != std::string::npos;
  const std::uint64_t borrowed = job.engine().counters().borrowed;
  job.finish();
  EXPECT_GT(me.memory->lends(), 0u) << "no payload travelled in a lent buffer";
  if (n > 1) {
    EXPECT_EQ(borrowed > 0, shared_memory) << borrowed << " payloads read in place over " << transports;
  }
}

// ---- put_signal order ----

// Every PE put_signals rounds of data (tens of 4 KiB chunks each, several round trips) to the next PE, each
// round into its own range, adding 1 to a signal word; a thread of the receiving PE polls the word and,
// each time it moves, checks that the data of every round it covers is already there.
constexpr int kSignalRounds = 24;
constexpr std::uint64_t kSignalWord = 0;
constexpr std::uint64_t kRoundData = 64;
constexpr std::uint64_t kRoundMax = 100000;

std::vector<std::byte> round_bytes(int from, int k) {
  // Less than kRoundMax - 6, so that rounds at their odd offsets (round_offset) never overlap.
  std::vector<std::byte> data(kRoundMax / 2 + (std::uint64_t(k) * 7919 + std::uint64_t(from) * 31) % (kRoundMax / 2 - 16));
  fill(data, big_seed(from, 0, 1000 + k));
  return data;
}
std::uint64_t round_offset(int k) { return kRoundData + std::uint64_t(k) * kRoundMax + std::uint64_t(k % 7); }

// Polls this PE's signal word until it reaches kSignalRounds; each new value must come after its rounds' data.
void poll_signals(job_pe& me, int from) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  std::atomic_ref<std::uint64_t> signal(*reinterpret_cast<std::uint64_t*>(me.base() + kSignalWord));
  std::uint64_t checked = 0;
  while (checked < kSignalRounds) {
    const std::uint64_t seen = signal.load(std::memory_order_acquire);
    if (seen > kSignalRounds) return void(ADD_FAILURE() << "signal " << seen << " past " << kSignalRounds);
    for (; checked < seen; ++checked) {
      const int k = static_cast<int>(checked);
      const std::vector<std::byte> data = round_bytes(from, k);
      if (std::memcmp(me.base() + round_offset(k), data.data(), data.size()) != 0)
        return void(ADD_FAILURE() << "signal " << seen << " seen before all " << data.size() << " bytes of round "
                                  << k << " from PE " << from);
    }
    if (std::chrono::steady_clock::now() > until)
      return void(ADD_FAILURE() << "signal stuck at " << seen << " of " << kSignalRounds);
    std::this_thread::yield();
  }
}

TEST_F(ProxyOverUcx, PutSignalNeverShowsTheSignalBeforeTheData) {
  const int n = boot().n_pes();
  ucx_engine_job job(boot(), {.n_pes = n, .heap_bytes = kRoundData + (kSignalRounds + 1) * kRoundMax,
                              .engine = {.chunk_bytes = 4096, .peer_window_bytes = 16384}, .seed = 23});
  std::memset(job.me().base() + kSignalWord, 0, 8);
  job.start();
  const int to = (job.pe() + 1) % n, from = (job.pe() + n - 1) % n;
  std::thread poller([&] { poll_signals(job.me(), from); });

  std::vector<std::vector<std::byte>> rounds;  // alive until the quiet
  for (int k = 0; k < kSignalRounds; ++k) rounds.push_back(round_bytes(job.pe(), k));
  for (int k = 0; k < kSignalRounds; ++k) {
    const proxy_request r{.op = proxy_op::put_signal, .signal_op = proxy_signal_op::add, .local_is_address = true,
                          .pe = to, .remote_offset = round_offset(k),
                          .local = reinterpret_cast<std::uintptr_t>(rounds[k].data()), .size = rounds[k].size(),
                          .value = 1, .signal_offset = kSignalWord};
    EXPECT_EQ(proxy_host_post(job.me().ring, r, kPatience).status, proxy_status::ok);
  }
  EXPECT_EQ(proxy_host_quiet(job.me().ring, kPatience), proxy_status::ok);
  poller.join();
  job.finish();
}

}  // namespace
}  // namespace shoal_mp
