// The proxy descriptor codec: every op round-trips with random fields, including every atomic op and
// type it accepts; malformed descriptors (unknown enumerators, reserved bits, out-of-budget or
// out-of-limit fields, fields the op does not use) decode to an error, never to a request.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "shoal/detail/proxy_descriptor.hpp"

namespace shoal::detail {
namespace {

constexpr proxy_op kAllOps[] = {proxy_op::put,    proxy_op::get,   proxy_op::put_signal, proxy_op::signal,
                                proxy_op::atomic, proxy_op::fence, proxy_op::quiet};

bool float_allowed(proxy_atomic_op op) {
  return op == proxy_atomic_op::fetch || op == proxy_atomic_op::set || op == proxy_atomic_op::swap ||
         op == proxy_atomic_op::fetch_add || op == proxy_atomic_op::add;
}

// A random valid request of `op`; for atomics, of the given op and type.
proxy_request random_request(std::mt19937_64& rng, proxy_op op, proxy_atomic_op aop = proxy_atomic_op::fetch,
                             proxy_atomic_type type = proxy_atomic_type::int64) {
  // Sizes and offsets spread over the whole budget: small, medium and near the top.
  auto any_below = [&](std::uint64_t bound) {  // [0, bound)
    const unsigned bits = 1 + rng() % 48;
    return (rng() & proxy_field_mask(bits)) % bound;
  };
  const std::uint64_t heap = kProxyMaxOffset + 1;
  proxy_request r{};
  r.op = op;
  r.sequence = rng();
  r.pe = static_cast<std::int32_t>(any_below(kProxyMaxPes));
  switch (op) {
    case proxy_op::put:
    case proxy_op::get:
    case proxy_op::put_signal:
      r.size = any_below(heap + 1);
      r.remote_offset = any_below(heap - r.size + 1);
      r.local_is_address = rng() % 2 == 0;
      r.local_is_host = r.local_is_address && rng() % 2 == 0;
      r.local = r.local_is_address ? rng() : any_below(heap - r.size + 1);
      if (op != proxy_op::get && rng() % 4 == 0) {  // a few bytes carried in the descriptor
        r.size = rng() % (kProxyMaxInlineBytes + 1);
        r.remote_offset = any_below(heap - r.size + 1);
        r.local_is_address = r.local_is_host = false;
        r.local_is_inline = true;
        r.local = rng() & proxy_field_mask(unsigned(8 * r.size));
      }
      if (op == proxy_op::put_signal) {
        r.signal_op = static_cast<proxy_signal_op>(rng() % kProxySignalOpCount);
        r.value = rng();
        r.signal_offset = any_below(heap / 8) * 8;
      }
      break;
    case proxy_op::signal:
      r.signal_op = static_cast<proxy_signal_op>(rng() % kProxySignalOpCount);
      r.value = rng();
      r.signal_offset = any_below(heap / 8) * 8;
      break;
    case proxy_op::atomic: {
      r.atomic_op = aop;
      r.atomic_type = type;
      const unsigned width = proxy_atomic_width(type);
      const std::uint64_t mask = width == 4 ? proxy_field_mask(32) : ~std::uint64_t{0};
      r.remote_offset = any_below(heap / width) * width;
      if (proxy_atomic_has_operand(aop)) r.value = rng() & mask;
      if (aop == proxy_atomic_op::compare_swap) r.compare = rng() & mask;
      if (proxy_atomic_fetches(aop)) r.completion = static_cast<std::uint32_t>(rng() % kProxyMaxCompletionSlots);
      break;
    }
    case proxy_op::fence:
    case proxy_op::quiet:
      if (rng() % 2 == 0) r.pe = kProxyAllPes;
      break;
  }
  return r;
}

void expect_round_trip(const proxy_request& r) {
  const proxy_encoded e = encode(r);
  ASSERT_EQ(e.status, proxy_status::ok) << to_string(e.status) << " op " << int(r.op);
  const proxy_decoded d = decode(e.descriptor);
  ASSERT_EQ(d.status, proxy_status::ok) << to_string(d.status) << " op " << int(r.op);
  ASSERT_EQ(d.request, r) << "op " << int(r.op);
  EXPECT_EQ(e.descriptor.words[proxy_descriptor::kSequenceWord], r.sequence) << "the sequence is word 0";
}

TEST(ProxyDescriptor, LayoutAndBudgets) {
  static_assert(sizeof(proxy_descriptor) == 64 && alignof(proxy_descriptor) == 64);
  static_assert(kProxyHeaderBits <= 64);
  // The codec is constexpr: a round trip at compile time.
  constexpr proxy_request r{.op = proxy_op::put_signal,
                            .signal_op = proxy_signal_op::add,
                            .pe = 5,
                            .sequence = 9,
                            .remote_offset = 64,
                            .local = 128,
                            .size = 32,
                            .value = 1,
                            .signal_offset = 8};
  static_assert(decode(encode(r).descriptor).request == r);

  const proxy_descriptor d = encode(r).descriptor;
  const std::uint64_t header = d.words[proxy_descriptor::kHeaderWord];
  EXPECT_EQ((header >> kProxyOpShift) & proxy_field_mask(kProxyOpBits), std::uint64_t(proxy_op::put_signal));
  EXPECT_EQ((header >> kProxySignalOpShift) & proxy_field_mask(kProxySignalOpBits), 1u);
  EXPECT_EQ((header >> kProxyPeShift) & proxy_field_mask(kProxyPeBits), 5u);
  EXPECT_EQ(d.words[proxy_descriptor::kRemoteOffsetWord], 64u);
  EXPECT_EQ(d.words[proxy_descriptor::kLocalWord], 128u);
  EXPECT_EQ(d.words[proxy_descriptor::kSizeWord], 32u);
  EXPECT_EQ(d.words[proxy_descriptor::kValueWord], 1u);
  EXPECT_EQ(d.words[proxy_descriptor::kCompareWord], 0u);
  EXPECT_EQ(d.words[proxy_descriptor::kSignalOffsetWord], 8u);
}

TEST(ProxyDescriptor, RoundTripEveryOpRandomFields) {
  std::mt19937_64 rng(11);
  for (proxy_op op : kAllOps) {
    if (op == proxy_op::atomic) continue;
    for (int i = 0; i < 3000; ++i) expect_round_trip(random_request(rng, op));
  }
  // Edge values: the largest fields each budget holds.
  proxy_request edge{
      .op = proxy_op::put, .pe = kProxyMaxPes - 1, .remote_offset = 0, .local = 0, .size = kProxyMaxSize};
  expect_round_trip(edge);
  edge.size = 1;
  edge.remote_offset = kProxyMaxOffset;
  edge.local = kProxyMaxOffset;
  expect_round_trip(edge);
  expect_round_trip({.op = proxy_op::quiet, .pe = kProxyAllPes, .sequence = ~std::uint64_t{0}});
}

TEST(ProxyDescriptor, RoundTripEveryAtomicOpAndType) {
  std::mt19937_64 rng(12);
  int combos = 0;
  for (unsigned a = 0; a < kProxyAtomicOpCount; ++a) {
    for (unsigned t = 0; t < kProxyAtomicTypeCount; ++t) {
      const auto aop = static_cast<proxy_atomic_op>(a);
      const auto type = static_cast<proxy_atomic_type>(t);
      if (proxy_atomic_is_float(type) && !float_allowed(aop)) {
        // Bit operations and compare-and-swap are meaningless for floats: rejected on both sides.
        proxy_request r = random_request(rng, proxy_op::atomic, aop, proxy_atomic_type::int64);
        r.atomic_type = type;
        r.value &= proxy_field_mask(proxy_atomic_width(type) * 8);
        r.compare &= proxy_field_mask(proxy_atomic_width(type) * 8);
        EXPECT_EQ(encode(r).status, proxy_status::bad_type_for_op) << a << " " << t;
        continue;
      }
      ++combos;
      for (int i = 0; i < 300; ++i) expect_round_trip(random_request(rng, proxy_op::atomic, aop, type));
    }
  }
  EXPECT_EQ(combos, 12 * 2 + 5 * 2);  // every op on both integer widths, fetch/set/swap/adds on both float widths
}

// Starts from a valid descriptor of `op`, applies `mutate` to its words, expects `want`.
template <typename Mutate>
void expect_rejected(const proxy_request& valid, Mutate mutate, proxy_status want, const proxy_limits& limits = {}) {
  ASSERT_EQ(encode(valid).status, proxy_status::ok);
  proxy_descriptor d = encode(valid).descriptor;
  mutate(d.words);
  const proxy_decoded got = decode(d, limits);
  EXPECT_EQ(got.status, want) << "got " << to_string(got.status) << ", wanted " << to_string(want);
}

std::uint64_t with_field(std::uint64_t header, unsigned shift, unsigned bits, std::uint64_t value) {
  return (header & ~(proxy_field_mask(bits) << shift)) | (value << shift);
}

TEST(ProxyDescriptor, RejectsMalformedDescriptors) {
  constexpr unsigned H = proxy_descriptor::kHeaderWord;
  const proxy_request put{.op = proxy_op::put, .pe = 3, .remote_offset = 256, .local = 512, .size = 64};
  const proxy_request amo{.op = proxy_op::atomic,
                          .atomic_op = proxy_atomic_op::fetch_or,
                          .atomic_type = proxy_atomic_type::int32,
                          .pe = 1,
                          .completion = 7,
                          .remote_offset = 16,
                          .value = 5};
  for (std::uint64_t op = kProxyOpCount; op < (1u << kProxyOpBits); ++op)
    expect_rejected(
        put, [&](auto& w) { w[H] = with_field(w[H], kProxyOpShift, kProxyOpBits, op); }, proxy_status::bad_op);
  for (std::uint64_t a = kProxyAtomicOpCount; a < (1u << kProxyAtomicOpBits); ++a)
    expect_rejected(
        amo, [&](auto& w) { w[H] = with_field(w[H], kProxyAtomicOpShift, kProxyAtomicOpBits, a); },
        proxy_status::bad_atomic_op);
  for (std::uint64_t t = kProxyAtomicTypeCount; t < (1u << kProxyAtomicTypeBits); ++t)
    expect_rejected(
        amo, [&](auto& w) { w[H] = with_field(w[H], kProxyAtomicTypeShift, kProxyAtomicTypeBits, t); },
        proxy_status::bad_atomic_type);
  for (unsigned bit = kProxyHeaderBits; bit < 64; ++bit)
    expect_rejected(
        put, [&](auto& w) { w[H] |= std::uint64_t{1} << bit; }, proxy_status::reserved_bits_set);
  // The host-memory flag means something only beside the address flag.
  expect_rejected(
      put, [&](auto& w) { w[H] |= kProxyFlagLocalIsHost << kProxyFlagShift; }, proxy_status::unused_field_set);

  // Beyond the budgets.
  expect_rejected(
      put, [](auto& w) { w[proxy_descriptor::kRemoteOffsetWord] = kProxyMaxOffset + 1; }, proxy_status::bad_offset);
  expect_rejected(
      put, [](auto& w) { w[proxy_descriptor::kSizeWord] = kProxyMaxSize + 1; }, proxy_status::bad_size);
  expect_rejected(
      put, [](auto& w) { w[proxy_descriptor::kLocalWord] = kProxyMaxOffset; }, proxy_status::bad_offset);
  expect_rejected(
      put, [](auto& w) { w[proxy_descriptor::kRemoteOffsetWord] = kProxyMaxOffset - 10; },
      proxy_status::bad_offset);  // the 64-byte range runs off the heap
  expect_rejected(
      put, [&](auto& w) { w[H] = with_field(w[H], kProxyPeShift, kProxyPeBits, kProxyAllPes); },
      proxy_status::bad_pe);  // "all PEs" is for fence and quiet only

  // Beyond the limits of this job.
  expect_rejected(put, [](auto&) {}, proxy_status::bad_pe, {.n_pes = 3});
  expect_rejected(put, [](auto&) {}, proxy_status::bad_offset, {.heap_bytes = 512});
  expect_rejected(put, [](auto&) {}, proxy_status::ok, {.n_pes = 4, .heap_bytes = 576});
  expect_rejected(amo, [](auto&) {}, proxy_status::bad_completion, {.completion_slots = 7});
  expect_rejected(amo, [](auto&) {}, proxy_status::ok, {.completion_slots = 8});

  // Fields the op does not use.
  expect_rejected(
      put, [](auto& w) { w[proxy_descriptor::kCompareWord] = 1; }, proxy_status::unused_field_set);
  expect_rejected(
      put, [](auto& w) { w[proxy_descriptor::kValueWord] = 1; }, proxy_status::unused_field_set);
  expect_rejected(
      put, [](auto& w) { w[proxy_descriptor::kSignalOffsetWord] = 8; }, proxy_status::unused_field_set);
  expect_rejected(
      put, [&](auto& w) { w[H] = with_field(w[H], kProxyCompletionShift, kProxyCompletionBits, 1); },
      proxy_status::unused_field_set);
  expect_rejected(
      amo, [](auto& w) { w[proxy_descriptor::kSizeWord] = 4; }, proxy_status::unused_field_set);
  expect_rejected(
      amo, [](auto& w) { w[proxy_descriptor::kValueWord] = std::uint64_t{1} << 32; },
      proxy_status::unused_field_set);  // a 32-bit operand with its high half set
  expect_rejected(
      amo, [](auto& w) { w[proxy_descriptor::kCompareWord] = 1; }, proxy_status::unused_field_set);
  const proxy_request fence{.op = proxy_op::fence, .pe = kProxyAllPes};
  expect_rejected(
      fence, [](auto& w) { w[proxy_descriptor::kRemoteOffsetWord] = 8; }, proxy_status::unused_field_set);

  // Alignment and type rules.
  expect_rejected(
      amo, [](auto& w) { w[proxy_descriptor::kRemoteOffsetWord] = 18; }, proxy_status::misaligned);
  expect_rejected(
      amo,
      [&](auto& w) {
        w[H] = with_field(w[H], kProxyAtomicTypeShift, kProxyAtomicTypeBits, std::uint64_t(proxy_atomic_type::float32));
      },
      proxy_status::bad_type_for_op);
  const proxy_request sig{.op = proxy_op::signal, .pe = 0, .value = 1, .signal_offset = 64};
  expect_rejected(
      sig, [](auto& w) { w[proxy_descriptor::kSignalOffsetWord] = 60; }, proxy_status::misaligned);
}

TEST(ProxyDescriptor, EncodeRejectsBadRequests) {
  proxy_request r{.op = static_cast<proxy_op>(kProxyOpCount)};
  proxy_encoded e = encode(r);
  EXPECT_EQ(e.status, proxy_status::bad_op);
  for (std::uint64_t w : e.descriptor.words) EXPECT_EQ(w, 0u) << "a failed encode leaves a zero descriptor";
  EXPECT_EQ(encode({.op = proxy_op::put, .pe = -1}).status, proxy_status::bad_pe);
  EXPECT_EQ(encode({.op = proxy_op::get, .pe = 0, .size = kProxyMaxSize + 1}).status, proxy_status::bad_size);
  EXPECT_EQ(encode({.op = proxy_op::signal, .signal_op = static_cast<proxy_signal_op>(2)}).status,
            proxy_status::bad_signal_op);
  EXPECT_EQ(encode({.op = proxy_op::atomic, .atomic_op = static_cast<proxy_atomic_op>(kProxyAtomicOpCount)}).status,
            proxy_status::bad_atomic_op);
  EXPECT_EQ(
      encode({.op = proxy_op::atomic, .atomic_type = static_cast<proxy_atomic_type>(kProxyAtomicTypeCount)}).status,
      proxy_status::bad_atomic_type);
  EXPECT_EQ(encode({.op = proxy_op::atomic, .atomic_op = proxy_atomic_op::set, .completion = 3}).status,
            proxy_status::unused_field_set);  // set does not fetch, so it has no result slot
  EXPECT_EQ(encode({.op = proxy_op::quiet, .pe = 0, .value = 1}).status, proxy_status::unused_field_set);
  // Inline data: puts and put_signals of at most 8 bytes, no address flags, no bits past the size.
  EXPECT_EQ(encode({.op = proxy_op::put, .local_is_inline = true, .local = 0xabcdef, .size = 3}).status,
            proxy_status::ok);
  EXPECT_EQ(encode({.op = proxy_op::get, .local_is_inline = true, .size = 3}).status, proxy_status::unused_field_set);
  EXPECT_EQ(encode({.op = proxy_op::put, .local_is_inline = true, .size = 9}).status, proxy_status::bad_size);
  EXPECT_EQ(encode({.op = proxy_op::put, .local_is_address = true, .local_is_inline = true, .size = 2}).status,
            proxy_status::unused_field_set);
  EXPECT_EQ(encode({.op = proxy_op::put, .local_is_inline = true, .local = 0x1000000, .size = 3}).status,
            proxy_status::unused_field_set);
}

// Any single-bit change of a valid descriptor either decodes to an error or to a request that encodes
// back to exactly the changed descriptor: the codec has no silent normalization.
TEST(ProxyDescriptor, BitFlipsAreRejectedOrCanonical) {
  std::mt19937_64 rng(13);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 400; ++i) {
    const proxy_op op = kAllOps[rng() % std::size(kAllOps)];
    auto aop = static_cast<proxy_atomic_op>(rng() % kProxyAtomicOpCount);
    auto type = static_cast<proxy_atomic_type>(rng() % 2);  // integer types accept every op
    const proxy_descriptor valid = encode(random_request(rng, op, aop, type)).descriptor;
    for (unsigned bit = 0; bit < 64 * proxy_descriptor::kWords; ++bit) {
      proxy_descriptor d = valid;
      d.words[bit / 64] ^= std::uint64_t{1} << (bit % 64);
      const proxy_decoded got = decode(d);
      if (got.status != proxy_status::ok) {
        ++rejected;
        continue;
      }
      ++accepted;
      const proxy_encoded again = encode(got.request);
      ASSERT_EQ(again.status, proxy_status::ok);
      ASSERT_EQ(std::memcmp(&again.descriptor, &d, sizeof d), 0) << "bit " << bit;
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

TEST(ProxyDescriptor, RandomWordsNeverDecodeToGarbage) {
  std::mt19937_64 rng(14);
  for (int i = 0; i < 20000; ++i) {
    proxy_descriptor d;
    for (auto& w : d.words) w = rng() & (rng() % 2 ? ~std::uint64_t{0} : proxy_field_mask(rng() % 64));
    const proxy_decoded got = decode(d);
    if (got.status != proxy_status::ok) continue;
    const proxy_encoded again = encode(got.request);
    ASSERT_EQ(again.status, proxy_status::ok);
    ASSERT_EQ(std::memcmp(&again.descriptor, &d, sizeof d), 0);
  }
}

}  // namespace
}  // namespace shoal::detail
