// Network atomics, fence and flush, on every PE of a shoalrun job (see network_tests.cpp). Atomics: every
// PE hammers one word of one PE at once, for each operation x width x fetching; the final value must be
// exact, and the old values the fetching ones returned must chain from the initial value to the final
// one (each old value is what the operation before it left), which is what a linearizable word allows.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "network_test_util.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/error.hpp"

namespace shoal_mp {
namespace {

using net::network_atomic;

std::uint64_t mask_of(unsigned width) { return width == 8 ? ~0ull : 0xffffffffull; }

const char* name_of(network_atomic op) {
  switch (op) {
    case network_atomic::add:
      return "add";
    case network_atomic::bit_and:
      return "and";
    case network_atomic::bit_or:
      return "or";
    case network_atomic::bit_xor:
      return "xor";
    case network_atomic::swap:
      return "swap";
    case network_atomic::compare_swap:
      return "compare_swap";
  }
  return "?";
}

std::uint64_t apply(network_atomic op, std::uint64_t old, std::uint64_t operand, unsigned width) {
  const std::uint64_t m = mask_of(width);
  switch (op) {
    case network_atomic::add:
      return (old + operand) & m;
    case network_atomic::bit_and:
      return old & operand & m;
    case network_atomic::bit_or:
      return (old | operand) & m;
    case network_atomic::bit_xor:
      return (old ^ operand) & m;
    default:
      return operand & m;  // swap, and a compare_swap that matched
  }
}

// One atomic this PE issued: what it asked and what came back.
struct issued_atomic {
  std::uint64_t operand = 0;
  std::uint64_t old = 0;
  bool completed = false;
  bool ok = false;
  static void on_done(void* ctx, net::network_status status, std::uint64_t value) {
    auto* a = static_cast<issued_atomic*>(ctx);
    a->completed = true;
    a->ok = status == net::network_status::ok;
    a->old = value;
  }
};

struct atomic_case {
  network_atomic op;
  unsigned width;
  bool fetch;
};

// Follows old -> new from `initial`, each (old, new) pair used once; true when it uses them all and ends
// at `final_value`.
bool chains(std::uint64_t initial, std::uint64_t final_value,
            const std::vector<std::pair<std::uint64_t, std::uint64_t>>& steps, std::string& why) {
  std::multimap<std::uint64_t, std::uint64_t> next(steps.begin(), steps.end());
  std::uint64_t at = initial;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    auto it = next.find(at);
    if (it == next.end()) {
      why = "after " + std::to_string(i) + " steps no operation saw the value " + std::to_string(at);
      return false;
    }
    at = it->second;
    next.erase(it);
  }
  if (at != final_value) {
    why = "the chain ends at " + std::to_string(at) + ", the word holds " + std::to_string(final_value);
    return false;
  }
  return true;
}

struct atomic_runner {
  net::network& net;
  shoal::bootstrap& bootstrap;
  net::network& nw() { return net; }
  shoal::bootstrap& boot() { return bootstrap; }
  int pe() { return net.pe(); }
  int n_pes() { return net.n_pes(); }
  void barrier() {
    with_progress(net, [&] { bootstrap.barrier(); });
  }

  // Every PE sends compare-and-swaps whose compare never matches the word (it holds `value`): the word must
  // keep `value` (a compare_swap that ignored its compare would write), and the fetching ones return it.
  void expect_mismatched_compares_change_nothing(const atomic_case& c, int target, net::network_region region,
                                                 std::uint64_t offset, const std::byte* words, std::uint64_t value) {
    const std::uint64_t m = mask_of(c.width);
    std::vector<issued_atomic> all(8);
    for (std::size_t i = 0; i < all.size(); ++i)
      nw().atomic(target, c.op, c.width, c.fetch, region, offset, (value + 1 + i) & m, (value ^ (1ull << i)) & m,
                  {issued_atomic::on_done, &all[i]});
    drive(
        nw(), [&] { return std::all_of(all.begin(), all.end(), [](auto& a) { return a.completed; }); },
        "mismatched compares");
    for (const issued_atomic& a : all) {
      EXPECT_TRUE(a.ok);
      if (c.fetch) {
        EXPECT_EQ(a.old, value) << "a failed compare_swap returns the word";
      }
    }
    EXPECT_EQ(word_once_all_landed(target, words, offset, c.width), value)
        << "a compare_swap whose compare did not match changed the word";
  }

  // The word of PE `target` at `offset`, as every PE sees it once every PE's atomics to it have landed.
  std::uint64_t word_once_all_landed(int target, const std::byte* words, std::uint64_t offset, unsigned width) {
    counter flushed;
    nw().flush(target, flushed.done());
    drive(
        nw(), [&] { return flushed.completed == 1; }, "flush");
    barrier();
    std::uint64_t word = 0;
    if (pe() == target) std::memcpy(&word, words + offset, width);
    with_progress(nw(), [&] { boot().broadcast(&word, sizeof word, target); });
    return word;
  }

  // Runs one case on a word of PE `target` at `offset` in `region`, whose memory on this PE is `words`.
  void run(const atomic_case& c, int target, net::network_region region, std::uint64_t offset, std::byte* words) {
    const std::uint64_t m = mask_of(c.width);
    const int n = n_pes();
    const bool bitwise =
        c.op == network_atomic::bit_and || c.op == network_atomic::bit_or || c.op == network_atomic::bit_xor;
    // Each bitwise operation changes its own bit, so every value the word takes is distinct.
    const int per_pe = bitwise                                            ? static_cast<int>(c.width * 8) / n
                       : c.op == network_atomic::compare_swap && !c.fetch ? 3
                                                                          : 40;
    std::uint64_t initial = 0;
    switch (c.op) {
      case network_atomic::add:
        initial = c.width == 4 ? 0xffffff00ull : 0xfffffffffffff000ull;
        break;  // wraps
      case network_atomic::bit_and:
        initial = m;
        break;
      case network_atomic::bit_or:
        initial = 0;
        break;
      case network_atomic::bit_xor:
        initial = 0x5a5a5a5a5a5a5a5aull & m;
        break;
      default:
        initial = 0xdead;
        break;
    }
    auto operand_of = [&](int p, int i) -> std::uint64_t {
      const int k = p * per_pe + i;
      switch (c.op) {
        case network_atomic::add:
          return 1 + k % 7;
        case network_atomic::bit_and:
          return ~(1ull << k) & m;
        case network_atomic::bit_or:
        case network_atomic::bit_xor:
          return 1ull << k;
        default:
          return (0x100000ull + std::uint64_t(k) * 0x10001ull) & m;
      }
    };
    if (pe() == target) std::memcpy(words + offset, &initial, c.width);
    barrier();

    // This PE's steps (old, new) for the chain check; compare_swap retries until it wins, one at a time.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> mine;
    std::size_t failures = 0;
    if (c.op == network_atomic::compare_swap && c.fetch) {
      std::uint64_t guess = initial;
      for (int won = 0; won < per_pe;) {
        issued_atomic a;
        nw().atomic(target, c.op, c.width, true, region, offset, (guess + 1) & m, guess, {issued_atomic::on_done, &a});
        if (!drive(
                nw(), [&] { return a.completed; }, "compare_swap"))
          return;
        failures += !a.ok;
        if (!a.ok) break;
        if (a.old == guess) {
          mine.push_back({a.old, (a.old + 1) & m});
          ++won;
        }
        guess = a.old;
      }
    } else {
      std::vector<issued_atomic> all(static_cast<std::size_t>(per_pe));
      for (int i = 0; i < per_pe; ++i) {
        all[i].operand = operand_of(pe(), i);
        nw().atomic(target, c.op, c.width, c.fetch, region, offset, all[i].operand, initial,
                    {issued_atomic::on_done, &all[i]});
      }
      drive(
          nw(), [&] { return std::all_of(all.begin(), all.end(), [](auto& a) { return a.completed; }); }, "atomics");
      for (const issued_atomic& a : all) {
        failures += !a.ok;
        if (c.fetch) mine.push_back({a.old, apply(c.op, a.old, a.operand, c.width)});
      }
    }
    EXPECT_EQ(failures, 0u);
    const std::uint64_t final_value = word_once_all_landed(target, words, offset, c.width);

    std::set<std::uint64_t> written;  // every operand, for swap
    std::uint64_t expected = initial;
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < per_pe; ++i) {
        written.insert(operand_of(p, i));
        if (c.op != network_atomic::swap && c.op != network_atomic::compare_swap)
          expected = apply(c.op, expected, operand_of(p, i), c.width);
      }
    if (c.op == network_atomic::swap || (c.op == network_atomic::compare_swap && !c.fetch)) {
      EXPECT_TRUE(written.count(final_value)) << "the word holds " << final_value << ", which nobody wrote";
    } else if (c.op == network_atomic::compare_swap) {
      EXPECT_EQ(final_value, (initial + std::uint64_t(n) * per_pe) & m);
    } else {
      EXPECT_EQ(final_value, expected);
    }
    if (c.op == network_atomic::compare_swap)
      expect_mismatched_compares_change_nothing(c, target, region, offset, words, final_value);

    if (mine.size() == static_cast<std::size_t>(per_pe) && (c.fetch || c.op == network_atomic::compare_swap)) {
      if (!c.fetch) return;
      std::vector<std::pair<std::uint64_t, std::uint64_t>> steps(mine.size() * n);
      with_progress(nw(), [&] { boot().all_gather(mine.data(), steps.data(), mine.size() * sizeof mine[0]); });
      std::string why;
      EXPECT_TRUE(chains(initial, final_value, steps, why)) << why;
    } else if (c.fetch) {
      ADD_FAILURE() << "this PE has " << mine.size() << " results of " << per_pe << "; the check cannot line up";
      std::abort();  // the others wait in the all_gather: end the job rather than hang it
    }
  }
};

TEST_F(NetworkTest, AtomicsOfEveryKindOnOneWordFromAllPes) {
  atomic_runner runner{nw(), boot()};
  std::vector<std::uint64_t> storage(64, 0);
  auto* words = reinterpret_cast<std::byte*>(storage.data());
  const net::network_region region = nw().expose(words, storage.size() * 8, net::memory_kind::host);
  int index = 0;
  for (network_atomic op : {network_atomic::add, network_atomic::bit_and, network_atomic::bit_or,
                            network_atomic::bit_xor, network_atomic::swap, network_atomic::compare_swap})
    for (unsigned width : {4u, 8u})
      for (bool fetch : {false, true}) {
        SCOPED_TRACE(std::string(name_of(op)) + " width " + std::to_string(width) + (fetch ? " fetching" : ""));
        // 4-byte words sit at offsets that are not 8-byte aligned.
        const std::uint64_t offset = std::uint64_t(index) * 8 + (width == 4 ? 4 : 0);
        runner.run({op, width, fetch}, index % n_pes(), region, offset, words);
        ++index;
      }
  barrier();
  nw().withdraw(region);
}

// --- fence

// Each PE puts, to every PE, round r's data into slot r and then, after a fence, r + 1 into its flag word.
// A target that reads flag f must find slots 0 .. f-1 complete, at any moment.
TEST_F(NetworkTest, FenceOrdersDataBeforeItsFlag) {
  constexpr int kRounds = 24;
  constexpr std::size_t kSlot = 8192 + 5;
  const std::size_t per_source = 8 + kRounds * kSlot;
  std::vector<std::uint64_t> storage((per_source * n_pes() + 7) / 8 + 1, 0);
  auto* base = reinterpret_cast<std::byte*>(storage.data());
  const net::network_region region = nw().expose(base, per_source * n_pes(), net::memory_kind::host);
  barrier();

  auto seed = [](int from, int to, int round) {
    return (std::uint64_t(from) << 40) ^ (std::uint64_t(to) << 20) ^ round ^ 0xfe;
  };
  std::vector<std::vector<std::byte>> data;
  std::vector<std::uint64_t> flags(static_cast<std::size_t>(kRounds));
  counter puts;
  std::size_t issued = 0;
  for (int r = 0; r < kRounds; ++r) {
    flags[r] = std::uint64_t(r) + 1;
    for (int q = 0; q < n_pes(); ++q) {
      data.emplace_back(kSlot);
      fill(data.back(), seed(pe(), q, r));
      nw().put(q, data.back().data(), kSlot, region, per_source * pe() + 8 + r * kSlot, puts.done());
    }
    nw().fence();
    for (int q = 0; q < n_pes(); ++q) nw().put(q, &flags[r], 8, region, per_source * pe(), puts.done());
    issued += 2 * static_cast<std::size_t>(n_pes());
    nw().progress();
  }

  std::vector<int> checked(static_cast<std::size_t>(n_pes()), 0);  // slots verified, per source
  std::size_t violations = 0;
  auto watch = [&] {
    bool all = true;
    for (int p = 0; p < n_pes(); ++p) {
      auto* flag = reinterpret_cast<std::uint64_t*>(base + per_source * p);
      const int f = static_cast<int>(std::atomic_ref<std::uint64_t>(*flag).load(std::memory_order_acquire));
      for (; checked[p] < f; ++checked[p]) {
        std::span<const std::byte> slot(base + per_source * p + 8 + checked[p] * kSlot, kSlot);
        if (!matches(slot, seed(p, pe(), checked[p])) && ++violations <= 5)
          ADD_FAILURE() << "flag " << f << " from PE " << p << " is visible but slot " << checked[p] << " is not";
      }
      all = all && f == kRounds;
    }
    return all && puts.completed == issued;
  };
  EXPECT_TRUE(drive(nw(), watch, "fenced puts"));
  EXPECT_EQ(puts.failed, 0u);
  EXPECT_EQ(violations, 0u);
  barrier();
  nw().withdraw(region);
}

// --- flush

// Round r: put slot r to every PE, flush (one PE at a time, or all at once), and only then tell each
// target in a message; the target checks the slot when the message arrives. Messages and puts travel
// separately, so only the flush makes the data visible by then.
struct flush_check {
  std::byte* base = nullptr;
  std::size_t per_source = 0, slot = 0;
  int pe = 0;
  std::size_t received = 0, bad = 0;
};

std::uint64_t flush_seed(int from, int to, int round) {
  return (std::uint64_t(from) << 40) ^ (std::uint64_t(to) << 20) ^ std::uint64_t(round) ^ 0xf1;
}

void on_flushed(void* ctx, const net::network_message& m) {
  auto* c = static_cast<flush_check*>(ctx);
  int round = -1;
  std::memcpy(&round, m.header.data(), sizeof round);
  std::span<const std::byte> slot(c->base + c->per_source * m.from + round * c->slot, c->slot);
  ++c->received;
  if (!matches(slot, flush_seed(m.from, c->pe, round)) && ++c->bad <= 5)
    ADD_FAILURE() << "PE " << m.from << " flushed round " << round << " but its data is not here";
}

TEST_F(NetworkTest, FlushToOnePeAndToAllMakesPutsVisible) {
  constexpr int kRounds = 12;  // even rounds flush each PE, odd ones flush all
  constexpr std::size_t kSlot = 20011;
  const std::size_t per_source = kRounds * kSlot;
  std::vector<std::byte> memory(per_source * n_pes());
  const net::network_region region = nw().expose(memory.data(), memory.size(), net::memory_kind::host);
  flush_check check{memory.data(), per_source, kSlot, pe()};
  nw().on_message(5, on_flushed, &check);
  barrier();

  std::vector<std::vector<std::byte>> data;
  std::vector<int> rounds(kRounds);
  counter puts, flushes, sends;
  std::size_t puts_issued = 0, flushes_issued = 0, sends_issued = 0;
  for (int r = 0; r < kRounds; ++r) {
    rounds[r] = r;
    for (int q = 0; q < n_pes(); ++q) {
      data.emplace_back(kSlot);
      fill(data.back(), flush_seed(pe(), q, r));
      nw().put(q, data.back().data(), kSlot, region, per_source * pe() + r * kSlot, puts.done());
      ++puts_issued;
    }
    const std::span<const std::byte> header(reinterpret_cast<const std::byte*>(&rounds[r]), sizeof(int));
    if (r % 2 == 0) {
      for (int q = 0; q < n_pes(); ++q) {
        counter one;
        nw().flush(q, one.done());
        drive(
            nw(), [&] { return one.completed == 1; }, "flush of one PE");
        EXPECT_EQ(one.failed, 0u);
        nw().send(q, 5, header, {}, sends.done());
        ++sends_issued;
      }
    } else {
      nw().flush(net::kNetworkAllPes, flushes.done());
      ++flushes_issued;
      drive(
          nw(), [&] { return flushes.completed == flushes_issued; }, "flush of all PEs");
      for (int q = 0; q < n_pes(); ++q) {
        nw().send(q, 5, header, {}, sends.done());
        ++sends_issued;
      }
    }
  }
  const std::size_t expected = static_cast<std::size_t>(kRounds) * n_pes();
  EXPECT_TRUE(drive(
      nw(),
      [&] { return check.received == expected && sends.completed == sends_issued && puts.completed == puts_issued; },
      "flush notices"));
  EXPECT_EQ(puts.failed + flushes.failed + sends.failed, 0u);
  EXPECT_EQ(check.bad, 0u);
  barrier();
  nw().withdraw(region);
}

}  // namespace
}  // namespace shoal_mp
