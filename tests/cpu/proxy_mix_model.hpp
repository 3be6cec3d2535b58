// The random mix of the proxy engine tests, shared by the one-process tests over the loopback network
// (test_proxy_engine.cpp) and the multi-process tests over UCX (tests/mp/proxy_over_ucx_tests.cpp): the
// heap layout every PE uses, the model of one atomic, and the producer threads that post the mix.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "test_proxy_engine_job.hpp"
#include "shoal/detail/proxy_descriptor.hpp"
#include "transport/proxy_engine_host.hpp"

namespace shoal::detail::engine_test {

// Heap of every PE: two shared counters, then one slice per producer of the job (only that producer
// writes it, on every PE, so its model is exact), then each local producer's arenas for put sources and
// get destinations.
constexpr int kProducers = 2;  // per PE
constexpr std::uint64_t kCounter32 = 0;
constexpr std::uint64_t kCounter64 = 8;
constexpr std::uint64_t kCounter64Start = (std::uint64_t{1} << 40) - 3;
constexpr std::uint64_t kSlicesBase = 64;
constexpr std::uint64_t kSliceData = 20000;
constexpr std::uint64_t kSignals = kSliceData;  // 4 signal words
constexpr std::uint64_t kAtomics = kSliceData + 32;
constexpr std::uint64_t kSliceBytes = kSliceData + 64;
constexpr std::uint64_t kArenaBytes = 48 * 1024;

inline std::uint64_t atomic_offset(proxy_atomic_type t) {
  switch (t) {
    case proxy_atomic_type::int32:
      return kAtomics;
    case proxy_atomic_type::float32:
      return kAtomics + 4;
    case proxy_atomic_type::int64:
      return kAtomics + 8;
    case proxy_atomic_type::float64:
      return kAtomics + 16;
  }
  return kAtomics;
}

struct mix_layout {
  int n_pes;
  std::uint64_t slice(int pe, int producer) const {
    return kSlicesBase + std::uint64_t(pe * kProducers + producer) * kSliceBytes;
  }
  std::uint64_t arenas() const { return kSlicesBase + std::uint64_t(n_pes * kProducers) * kSliceBytes; }
  std::uint64_t source_arena(int producer) const { return arenas() + std::uint64_t(producer) * 2 * kArenaBytes; }
  std::uint64_t get_arena(int producer) const { return source_arena(producer) + kArenaBytes; }
  std::uint64_t heap_bytes() const { return arenas() + kProducers * 2 * kArenaBytes; }
};

// The model of one atomic: independent of host_atomic_apply on purpose. Returns the old value.
inline std::uint64_t model_atomic(std::byte* word, proxy_atomic_op op, unsigned width, std::uint64_t value,
                           std::uint64_t compare) {
  std::uint64_t old = 0;
  std::memcpy(&old, word, width);
  const std::uint64_t mask = width == 4 ? 0xffffffffull : ~0ull;
  std::uint64_t next = old;
  switch (op) {
    case proxy_atomic_op::fetch:
      break;
    case proxy_atomic_op::set:
    case proxy_atomic_op::swap:
      next = value;
      break;
    case proxy_atomic_op::compare_swap:
      if (old == compare) next = value;
      break;
    case proxy_atomic_op::fetch_add:
    case proxy_atomic_op::add:
      next = (old + value) & mask;
      break;
    case proxy_atomic_op::fetch_and:
    case proxy_atomic_op::bit_and:
      next = old & value;
      break;
    case proxy_atomic_op::fetch_or:
    case proxy_atomic_op::bit_or:
      next = old | value;
      break;
    case proxy_atomic_op::fetch_xor:
    case proxy_atomic_op::bit_xor:
      next = old ^ value;
      break;
  }
  std::memcpy(word, &next, width);
  return old;
}

// One fetch_add on a shared counter, as gathered through the bootstrap.
struct count_record {
  std::uint32_t target;
  std::uint32_t wide;
  std::uint64_t old;
};

// One producer thread of PE `pe` (whose engine and heap are `me`): rounds of random requests to random PEs
// (its own included), each ended by a quiet after which its gets' destinations are checked and, when the
// test can read every PE's heap (one process), `check_slice` compares its slice on each PE with the model.
// `heap_of(t)` gives PE t's heap as it was before the producers start (the model's first state). A failure
// is reported and ends the producer (failed()), so a PE can still reach the collectives that follow.
class mix_producer {
 public:
  using heap_fn = std::function<std::vector<std::byte>(int pe)>;
  using slice_check_fn = std::function<void(int pe, std::uint64_t offset, const std::vector<std::byte>& model)>;

  mix_producer(job_pe& me, int pe, int n_pes, int producer, std::uint64_t seed, const heap_fn& heap_of,
               slice_check_fn check_slice = {})
      : me_(me), pe_(pe), n_pes_(n_pes), producer_(producer), layout_{n_pes}, rng_(seed),
        check_slice_(std::move(check_slice)), source_vec_(kArenaBytes), get_vec_(kArenaBytes) {
    for (int t = 0; t < n_pes; ++t) {
      const std::vector<std::byte> heap = heap_of(t);
      model_.emplace_back(heap.begin() + my_slice(), heap.begin() + my_slice() + kSliceBytes);
    }
  }

  void run(int rounds, int ops) {
    for (int r = 0; r < rounds && !failed_; ++r) round(ops);
  }
  const std::vector<std::vector<std::byte>>& models() const { return model_; }  // my slice on each PE
  const std::vector<count_record>& counts() const { return counts_; }
  bool failed() const { return failed_; }

 private:
  struct pending_get {
    const std::byte* destination;
    std::vector<std::byte> expected;
    std::string what;
  };

  std::uint64_t my_slice() const { return layout_.slice(pe_, producer_); }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  std::uint64_t length() {
    const std::uint64_t pick = below(100);
    if (pick < 55) return below(65);
    if (pick < 85) return 65 + below(4000);
    return 4001 + below(kSliceData - 4000);
  }

  // A local buffer of n bytes from this round's arenas, in the heap or (local_is_address) in a vector.
  bool take(bool source, std::uint64_t n, proxy_request& r, std::byte*& where) {
    const bool address = rng_() % 2 == 0;
    std::uint64_t& used = source ? (address ? used_source_vec_ : used_source_heap_)
                                 : (address ? used_get_vec_ : used_get_heap_);
    if (used + n > kArenaBytes) return false;
    r.local_is_address = address;
    if (address) {
      where = (source ? source_vec_ : get_vec_).data() + used;
      r.local = reinterpret_cast<std::uintptr_t>(where);
    } else {
      r.local = (source ? layout_.source_arena(producer_) : layout_.get_arena(producer_)) + used;
      where = me_.base() + r.local;
    }
    used += n;
    return true;
  }

  void post(const proxy_request& r) {
    const proxy_status s = proxy_host_post(me_.ring, r, kPatience).status;
    if (s != proxy_status::ok) fail("post", s);
  }
  std::uint64_t call(const proxy_request& r) {
    const proxy_host_result res = proxy_host_call(me_.ring, r, kPatience);
    if (res.status != proxy_status::ok) fail("call", res.status);
    return res.value;
  }
  void fail(const char* what, proxy_status s) {
    ADD_FAILURE() << "PE " << pe_ << " producer " << producer_ << ": " << what << ": " << to_string(s);
    failed_ = true;
  }

  bool put(int target, bool with_signal) {
    const std::uint64_t n = length();
    const std::uint64_t at = below(kSliceData - n + 1);
    proxy_request r{.op = with_signal ? proxy_op::put_signal : proxy_op::put, .pe = target,
                    .remote_offset = my_slice() + at, .size = n};
    std::byte* src = nullptr;
    if (!take(true, n, r, src)) return false;
    const auto data = random_bytes(rng_, n);
    std::copy(data.begin(), data.end(), src);
    std::copy(data.begin(), data.end(), model_[target].begin() + at);
    if (with_signal) add_signal(r, target);
    post(r);
    return true;
  }

  void add_signal(proxy_request& r, int target) {
    const std::uint64_t word = kSignals + 8 * below(4);
    r.signal_op = rng_() % 2 ? proxy_signal_op::add : proxy_signal_op::set;
    r.signal_offset = my_slice() + word;
    r.value = rng_();
    std::uint64_t v;
    std::memcpy(&v, model_[target].data() + word, 8);
    v = r.signal_op == proxy_signal_op::add ? v + r.value : r.value;
    std::memcpy(model_[target].data() + word, &v, 8);
  }

  bool get(int target) {
    const std::uint64_t n = length();
    const std::uint64_t at = below(kSliceData - n + 1);
    proxy_request r{.op = proxy_op::get, .pe = target, .remote_offset = my_slice() + at, .size = n};
    std::byte* dst = nullptr;
    if (!take(false, n, r, dst)) return false;
    // Requests to one target are applied in ticket order, so the get sees every earlier put of mine.
    gets_.push_back({dst, {model_[target].begin() + at, model_[target].begin() + at + n},
                     "get of " + std::to_string(n) + " bytes at " + std::to_string(at) + " from PE " +
                         std::to_string(target)});
    post(r);
    return true;
  }

  void atomic(int target) {
    static constexpr proxy_atomic_type kTypes[] = {proxy_atomic_type::int32, proxy_atomic_type::int64,
                                                   proxy_atomic_type::float32, proxy_atomic_type::float64};
    const proxy_atomic_type type = kTypes[below(4)];
    const proxy_atomic_op op = proxy_atomic_is_float(type) ? proxy_atomic_op(below(3))  // fetch, set, swap
                                                           : proxy_atomic_op(below(kProxyAtomicOpCount));
    const unsigned width = proxy_atomic_width(type);
    const std::uint64_t mask = width == 4 ? 0xffffffffull : ~0ull;
    std::byte* word = model_[target].data() + atomic_offset(type);
    std::uint64_t current = 0;
    std::memcpy(&current, word, width);
    proxy_request r{.op = proxy_op::atomic, .atomic_op = op, .atomic_type = type, .pe = target,
                    .remote_offset = my_slice() + atomic_offset(type)};
    if (proxy_atomic_has_operand(op)) r.value = rng_() & mask;
    if (op == proxy_atomic_op::compare_swap) r.compare = rng_() % 2 ? current : rng_() & mask;
    const std::uint64_t expected = model_atomic(word, op, width, r.value, r.compare);
    if (proxy_atomic_fetches(op)) {
      r.completion = static_cast<std::uint32_t>(producer_);  // my result slot
      EXPECT_EQ(call(r), expected) << "atomic op " << int(op) << " type " << int(type) << " on PE " << target;
    } else {
      post(r);
    }
  }

  void count(int target) {
    const bool wide = rng_() % 2;
    proxy_request r{.op = proxy_op::atomic, .atomic_op = proxy_atomic_op::fetch_add,
                    .atomic_type = wide ? proxy_atomic_type::int64 : proxy_atomic_type::int32, .pe = target,
                    .completion = static_cast<std::uint32_t>(producer_),
                    .remote_offset = wide ? kCounter64 : kCounter32, .value = 1};
    const std::uint64_t old = call(r);
    counts_.push_back({static_cast<std::uint32_t>(target), wide, old});
  }

  void round(int ops) {
    used_source_heap_ = used_source_vec_ = used_get_heap_ = used_get_vec_ = 0;
    gets_.clear();
    for (int i = 0; i < ops && !failed_; ++i) {
      const int target = static_cast<int>(below(n_pes_));
      const std::uint64_t pick = below(100);
      bool room = true;
      if (pick < 30) {
        room = put(target, false);
      } else if (pick < 50) {
        room = get(target);
      } else if (pick < 60) {
        room = put(target, true);
      } else if (pick < 70) {
        proxy_request r{.op = proxy_op::signal, .pe = target};
        add_signal(r, target);
        post(r);
      } else if (pick < 90) {
        atomic(target);
      } else if (pick < 95) {
        count(target);
      } else {
        post(proxy_request{.op = proxy_op::fence, .pe = rng_() % 2 ? kProxyAllPes : target});
      }
      if (!room) break;
    }
    const proxy_status q = proxy_host_quiet(me_.ring, kPatience);
    if (q != proxy_status::ok) return fail("quiet", q);
    for (const pending_get& g : gets_)
      if (std::memcmp(g.destination, g.expected.data(), g.expected.size()) != 0) {
        ADD_FAILURE() << "PE " << pe_ << " producer " << producer_ << ": " << g.what;
        failed_ = true;
      }
    if (check_slice_)
      for (int t = 0; t < n_pes_; ++t) check_slice_(t, my_slice(), model_[t]);
  }

  job_pe& me_;
  int pe_;
  int n_pes_;
  int producer_;
  mix_layout layout_;
  std::mt19937_64 rng_;
  slice_check_fn check_slice_;
  std::vector<std::vector<std::byte>> model_;  // my slice on each PE
  std::vector<std::byte> source_vec_, get_vec_;
  std::uint64_t used_source_heap_ = 0, used_source_vec_ = 0, used_get_heap_ = 0, used_get_vec_ = 0;
  std::vector<pending_get> gets_;
  std::vector<count_record> counts_;
  bool failed_ = false;
};

}  // namespace shoal::detail::engine_test
