// Multi-process tests of the proxy's network (transport/network.hpp) over its UCX engine. NetworkTest runs
// on every PE of a job started by shoalrun (2 and 4 PEs, each over UCX_TLS=tcp and over shared memory);
// every PE runs the same tests in the same order, so the collectives inside line up. Data is random but
// reproducible, so every PE can compute what it must see. Checks are non-fatal where a PE must still
// reach the next collective.
//
// Atomics, fence and flush are in network_rma_tests.cpp; the fault test in network_fault_tests.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "network_test_util.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"

namespace shoal_mp {
namespace {

// --- capabilities

TEST_F(NetworkTest, ReportsWhatItIs) {
  const net::network_capabilities& caps = nw().capabilities();
  EXPECT_EQ(caps.library.rfind("UCX 1.", 0), 0u) << caps.library;
  EXPECT_FALSE(caps.transports.empty());
  EXPECT_TRUE(caps.remote_atomics);
  if (pe() == 0)
    std::printf("network: %s, transports %s, GPU memory %s\n", caps.library.c_str(), caps.transports.c_str(),
                caps.cuda_memory ? "yes" : "no");
  EXPECT_EQ(nw().pe(), boot().pe());
  EXPECT_EQ(nw().n_pes(), boot().n_pes());
}

TEST_F(NetworkTest, GpuMemoryIsRefusedWhenUnsupported) {
  if (nw().capabilities().cuda_memory) GTEST_SKIP() << "this UCX supports GPU memory";
  std::vector<std::byte> fake(64);
  try {
    nw().expose(fake.data(), fake.size(), net::memory_kind::cuda);
    ADD_FAILURE() << "expose(cuda) succeeded without GPU support";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.category(), shoal::errc::unsupported) << e.what();
  }
}

// --- messages

// What a test message carries in its header (followed by `extra` reproducible bytes).
struct message_head {
  std::int32_t from;
  std::int32_t to;
  std::uint64_t seq;
  std::uint64_t payload_bytes;
  std::uint64_t extra_header_bytes;
};

constexpr std::size_t kMessageSizes[] = {0, 1, 17, 64 << 10, 4 << 20};
constexpr std::size_t kExtraHeader[] = {0, 5, 3000, 20000};  // the last ones exceed UCP's header limit

struct message_plan {
  std::size_t payload;
  std::size_t extra;
};

// The sequence of messages each PE sends to each PE: every size, many rounds, two of 4 MiB.
std::vector<message_plan> message_sequence() {
  std::vector<message_plan> plan;
  for (int round = 0; round < 24; ++round)
    for (std::size_t i = 0; i < std::size(kMessageSizes); ++i) {
      if (kMessageSizes[i] == (4u << 20) && round % 12 != 3) continue;
      plan.push_back({kMessageSizes[i], kExtraHeader[(round + i) % std::size(kExtraHeader)]});
    }
  return plan;
}

std::uint64_t message_seed(int from, int to, std::uint64_t seq, int part) {
  return (std::uint64_t(from) << 48) ^ (std::uint64_t(to) << 32) ^ (seq << 2) ^ std::uint64_t(part);
}

struct receiver {
  int pe = 0;
  std::vector<std::uint64_t> next_seq;  // per sender
  std::size_t received = 0;
  std::size_t bad = 0;
};

void on_test_message(void* ctx, const net::network_message& m) {
  auto* r = static_cast<receiver*>(ctx);
  ++r->received;
  message_head h{};
  if (m.header.size() < sizeof h) {
    ADD_FAILURE() << "header of " << m.header.size() << " bytes from PE " << m.from;
    ++r->bad;
    return;
  }
  std::memcpy(&h, m.header.data(), sizeof h);
  const bool ok_ids = h.from == m.from && h.to == r->pe;
  const bool in_order = h.seq == r->next_seq[static_cast<std::size_t>(m.from)]++;
  const bool ok_sizes = m.payload.size() == h.payload_bytes && m.header.size() == sizeof h + h.extra_header_bytes;
  bool ok_bytes = ok_sizes && matches(m.payload, message_seed(h.from, h.to, h.seq, 0)) &&
                  matches(m.header.subspan(sizeof h), message_seed(h.from, h.to, h.seq, 1));
  if (!(ok_ids && in_order && ok_bytes)) {
    ++r->bad;
    if (r->bad <= 5)
      ADD_FAILURE() << "message from PE " << m.from << " (says " << h.from << " -> " << h.to << ", #" << h.seq
                    << ", expected #" << r->next_seq[m.from] - 1 << "): ids " << ok_ids << " order " << in_order
                    << " sizes " << ok_sizes << " bytes " << ok_bytes;
  }
}

TEST_F(NetworkTest, MessagesArriveIntactAndInOrderFromEveryPe) {
  const std::vector<message_plan> plan = message_sequence();
  receiver r{.pe = pe(), .next_seq = std::vector<std::uint64_t>(n_pes(), 0)};
  nw().on_message(3, on_test_message, &r);
  barrier();  // every PE's handler is in place

  // Every message to every PE is in flight at once; buffers live until their completion.
  std::vector<std::vector<std::byte>> headers, payloads;
  counter sent;
  for (std::uint64_t seq = 0; seq < plan.size(); ++seq)
    for (int q = 0; q < n_pes(); ++q) {
      message_head h{pe(), q, seq, plan[seq].payload, plan[seq].extra};
      std::vector<std::byte> header(sizeof h + h.extra_header_bytes);
      std::memcpy(header.data(), &h, sizeof h);
      fill(std::span(header).subspan(sizeof h), message_seed(pe(), q, seq, 1));
      std::vector<std::byte> payload(h.payload_bytes);
      fill(payload, message_seed(pe(), q, seq, 0));
      headers.push_back(std::move(header));
      payloads.push_back(std::move(payload));
      nw().send(q, 3, headers.back(), payloads.back(), sent.done());
    }
  const std::size_t expected = plan.size() * static_cast<std::size_t>(n_pes());
  EXPECT_TRUE(drive(
      nw(), [&] { return sent.completed == expected && r.received == expected; }, "every message"))
      << "sent " << sent.completed << "/" << expected << ", received " << r.received;
  EXPECT_EQ(sent.failed, 0u);
  EXPECT_EQ(r.bad, 0u);
  barrier();
}

// --- put and get

// Each PE's exposed buffer starts at an odd address and has an odd length; PE p writes only into slice p
// of every PE, in non-overlapping pieces of odd sizes at odd offsets.
struct piece {
  std::size_t offset;
  std::size_t bytes;
};

std::vector<piece> pieces_of_slice(std::size_t slice_begin, std::size_t slice_bytes, std::uint64_t seed) {
  std::vector<piece> out;
  splitmix rng{seed};
  std::size_t at = slice_begin + 1 + rng.next() % 7;
  const std::size_t end = slice_begin + slice_bytes;
  const std::size_t sizes[] = {1, 3, 17, 255, 4097, 65537, 300001};
  for (int i = 0; at < end; ++i) {
    std::size_t bytes = std::min(sizes[rng.next() % std::size(sizes)], end - at);
    out.push_back({at, bytes});
    at += bytes + rng.next() % 5;  // gaps stay untouched
  }
  return out;
}

TEST_F(NetworkTest, PutsAndGetsOfOddSizesLandExactly) {
  const std::size_t n = static_cast<std::size_t>(n_pes());
  const std::size_t slice = 400009;
  const std::size_t bytes = slice * n + 13;
  std::vector<std::byte> storage(bytes + 3);
  std::span<std::byte> mine(storage.data() + 3, bytes);  // an odd base address
  auto initial = [&](int owner) { return message_seed(owner, 0, 777, 2); };
  fill(mine, initial(pe()));
  const net::network_region region = nw().expose(mine.data(), mine.size(), net::memory_kind::host);
  ASSERT_TRUE(region.valid());

  // The data PE p puts at PE q.
  auto source_of = [&](int p, int q) {
    std::vector<std::byte> data(slice);
    fill(data, message_seed(p, q, 4242, 3));
    return data;
  };
  std::vector<std::vector<std::byte>> sources;
  counter puts;
  std::size_t issued = 0;
  for (int q = 0; q < n_pes(); ++q) {
    sources.push_back(source_of(pe(), q));
    for (const piece& pc : pieces_of_slice(slice * pe(), slice, message_seed(pe(), q, 1, 4))) {
      nw().put(q, sources.back().data() + (pc.offset - slice * pe()), pc.bytes, region, pc.offset, puts.done());
      ++issued;
    }
  }
  counter flushed;
  nw().flush(net::kNetworkAllPes, flushed.done());
  EXPECT_TRUE(drive(
      nw(), [&] { return puts.completed == issued && flushed.completed == 1; }, "puts and flush"));
  EXPECT_EQ(puts.failed + flushed.failed, 0u);
  barrier();

  // What PE `owner`'s memory must hold now: its initial pattern, with every PE's pieces on top.
  auto expected_memory = [&](int owner) {
    std::vector<std::byte> want(bytes);
    fill(want, initial(owner));
    for (int p = 0; p < n_pes(); ++p) {
      std::vector<std::byte> src = source_of(p, owner);
      for (const piece& pc : pieces_of_slice(slice * p, slice, message_seed(p, owner, 1, 4)))
        std::memcpy(want.data() + pc.offset, src.data() + (pc.offset - slice * p), pc.bytes);
    }
    return want;
  };
  std::vector<std::byte> want_here = expected_memory(pe());
  EXPECT_TRUE(std::equal(mine.begin(), mine.end(), want_here.begin()))
      << "first difference at byte " << first_difference(mine, want_here);

  // Gets of odd ranges from every PE (into odd local addresses) against the same reference.
  for (int q = 0; q < n_pes(); ++q) {
    std::vector<std::byte> want = expected_memory(q);
    std::vector<piece> ranges = pieces_of_slice(0, bytes, message_seed(pe(), q, 9, 5));
    std::vector<std::vector<std::byte>> got;
    counter gets;
    for (const piece& pc : ranges) {
      got.emplace_back(pc.bytes + 1);
      nw().get(q, got.back().data() + 1, pc.bytes, region, pc.offset, gets.done());
    }
    EXPECT_TRUE(drive(
        nw(), [&] { return gets.completed == ranges.size(); }, "gets"));
    EXPECT_EQ(gets.failed, 0u);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < ranges.size(); ++i)
      wrong += !std::equal(got[i].begin() + 1, got[i].end(), want.begin() + ranges[i].offset);
    EXPECT_EQ(wrong, 0u) << "of " << ranges.size() << " gets from PE " << q;
  }
  barrier();
  nw().withdraw(region);
  // Withdrawn ids are reused, identically on every PE.
  const net::network_region again = nw().expose(mine.data(), 64, net::memory_kind::host);
  EXPECT_EQ(again.id, region.id);
  nw().withdraw(again);
}

TEST_F(NetworkTest, ZeroByteAndBadArgumentsAreHandled) {
  // Random words on every PE: a zero-byte put that writes anyway, or a zero-byte get that reads anyway,
  // changes some PE's words, which must all be as they were at the end.
  std::mt19937_64 rng(1000 + pe());
  std::vector<std::uint64_t> words(8);
  for (auto& w : words) w = rng();
  const std::vector<std::uint64_t> before = words;
  const net::network_region region = nw().expose(words.data(), words.size() * 8, net::memory_kind::host);
  counter c;
  nw().put((pe() + 1) % n_pes(), words.data(), 0, region, 0, c.done());
  nw().get((pe() + 1) % n_pes(), words.data(), 0, region, 64, c.done());
  EXPECT_TRUE(drive(
      nw(), [&] { return c.completed == 2; }, "empty operations"));
  EXPECT_EQ(c.failed, 0u);
  EXPECT_THROW(nw().put(n_pes(), words.data(), 8, region, 0, {}), shoal::error);
  EXPECT_THROW(nw().put(0, words.data(), 8, region, 60, {}), shoal::error);
  EXPECT_THROW(nw().atomic(0, net::network_atomic::add, 8, false, region, 4, 1, 0, {}), shoal::error);
  EXPECT_THROW(nw().atomic(0, net::network_atomic::add, 2, false, region, 0, 1, 0, {}), shoal::error);
  EXPECT_THROW(nw().get(0, words.data(), 8, net::network_region{77}, 0, {}), shoal::error);
  barrier();  // every PE's empty put into this PE has completed
  EXPECT_EQ(words, before) << "an empty put or get moved data, or a refused call did";
  nw().withdraw(region);
}

}  // namespace
}  // namespace shoal_mp
