// The proxy engine's parts on their own: the wire header check, host_local_memory's operations against
// a model, and the loopback network's contract (per-pair order, completions only in progress(), one-sided
// operations on exposed memory, a killed PE).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "shoal/error.hpp"
#include "transport/local_memory.hpp"
#include "transport/loopback_network.hpp"
#include "transport/proxy_wire.hpp"

namespace shoal::detail {
namespace {

// ---- wire ----

const char* check(const proxy_wire_header& h, std::size_t payload = 0, std::uint64_t heap = 4096) {
  proxy_wire_header out;
  return proxy_wire_check(proxy_wire_bytes(h), payload, heap, out);
}

TEST(ProxyWire, WellFormedMessagesPass) {
  using k = proxy_wire_kind;
  EXPECT_EQ(check({.kind = k::put_data, .request = 9, .chunk_offset = 30, .offset = 4000, .bytes = 96}, 96), nullptr);
  EXPECT_EQ(check({.kind = k::get_request, .request = 9, .offset = 0, .bytes = 4096}), nullptr);
  EXPECT_EQ(check({.kind = k::signal, .signal_op = proxy_signal_op::add, .request = 1, .value = 5,
                   .signal_offset = 4088}),
            nullptr);
  EXPECT_EQ(check({.kind = k::atomic, .atomic_op = proxy_atomic_op::compare_swap,
                   .atomic_type = proxy_atomic_type::int64, .offset = 8, .value = 1, .compare = 2}),
            nullptr);
  EXPECT_EQ(check({.kind = k::ping}), nullptr);
  EXPECT_EQ(check({.kind = k::ack, .request = 3, .bytes = 100}), nullptr);
  EXPECT_EQ(check({.kind = k::get_data, .request = 3, .chunk_offset = 7, .bytes = 5}, 5), nullptr);
  EXPECT_EQ(check({.kind = k::atomic_result, .request = 3, .value = ~0ull}), nullptr);
}

TEST(ProxyWire, MalformedMessagesAreNamed) {
  using k = proxy_wire_kind;
  const proxy_wire_header put{.kind = k::put_data, .offset = 8, .bytes = 16};
  auto with = [&](auto change) {
    proxy_wire_header h = put;
    change(h);
    return h;
  };
  EXPECT_STREQ(check(with([](auto& h) { h.magic = 1; }), 16), "bad magic");
  EXPECT_STREQ(check(with([](auto& h) { h.version = 2; }), 16), "unsupported protocol version");
  EXPECT_STREQ(check(with([](auto& h) { h.kind = proxy_wire_kind(0); }), 16), "unknown message kind");
  EXPECT_STREQ(check(with([](auto& h) { h.kind = proxy_wire_kind(99); }), 16), "unknown message kind");
  EXPECT_STREQ(check(with([](auto& h) { h.reserved = 1; }), 16), "reserved field set");
  EXPECT_STREQ(check(put, 15), "payload size does not match the header");
  EXPECT_STREQ(check(with([](auto& h) { h.offset = 4090; }), 16), "data range beyond the heap");
  EXPECT_STREQ(check(with([](auto& h) { h.value = 1; }), 16), "value set");
  EXPECT_STREQ(check(with([](auto& h) { h.signal_offset = 8; }), 16), "signal field set");
  EXPECT_STREQ(check({.kind = k::signal, .signal_offset = 12}), "signal word beyond the heap or misaligned");
  EXPECT_STREQ(check({.kind = k::signal, .signal_op = proxy_signal_op(3), .signal_offset = 8}), "unknown signal op");
  EXPECT_STREQ(check({.kind = k::atomic, .atomic_op = proxy_atomic_op::bit_and, .atomic_type = proxy_atomic_type::float32}),
               to_string(proxy_status::bad_type_for_op));
  EXPECT_STREQ(check({.kind = k::atomic, .atomic_type = proxy_atomic_type::int64, .offset = 4}),
               to_string(proxy_status::misaligned));
  EXPECT_STREQ(check({.kind = k::ping, .request = 1}), "ping with a request id");
  EXPECT_STREQ(check({.kind = k::ack, .offset = 8}), "offset set");
  proxy_wire_header out;
  const std::byte short_header[63] = {};
  EXPECT_STREQ(proxy_wire_check(short_header, 0, 4096, out), "header of the wrong size");
}

// ---- host_local_memory ----

// Float fetch_add and add on heap words: the old bits back, and the word holds before + operand computed in
// that float type. Random finite values of mixed magnitude, so a wrong width or an integer add shows.
template <typename F, typename W>
void check_float_adds(proxy_atomic_type type, std::uint64_t seed) {
  std::vector<W> storage(32);
  host_local_memory memory(storage.data(), storage.size() * sizeof(W));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<F> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-20, 20);
  const auto random_float = [&] { return std::ldexp(mantissa(rng), exponent(rng)); };
  const auto bits = [](F f) {
    W w;
    std::memcpy(&w, &f, sizeof w);
    return w;
  };
  for (auto& w : storage) w = bits(random_float());
  for (int i = 0; i < 1000; ++i) {
    const std::size_t index = rng() % storage.size();
    const W before = storage[index];
    F before_value;
    std::memcpy(&before_value, &before, sizeof before_value);
    const F operand = random_float();
    const auto op = rng() % 2 ? proxy_atomic_op::fetch_add : proxy_atomic_op::add;
    std::uint64_t old = 0xdead;
    memory.atomic(index * sizeof(W), {.op = op, .type = type, .value = bits(operand)}, &old);
    ASSERT_EQ(old, std::uint64_t(before)) << "step " << i;
    ASSERT_EQ(storage[index], bits(F(before_value + operand)))
        << "step " << i << ": " << before_value << " + " << operand;
  }
  // Concurrent adders of whole numbers: every add lands once, so the total is exact.
  storage[0] = bits(F(0));
  std::vector<std::thread> adders;
  for (int t = 0; t < 4; ++t)
    adders.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        std::uint64_t old = 0;
        memory.atomic(0, {.op = proxy_atomic_op::add, .type = type, .value = bits(F(t + 1))}, &old);
      }
    });
  for (auto& a : adders) a.join();
  EXPECT_EQ(storage[0], bits(F(2000 * (1 + 2 + 3 + 4))));
}

TEST(HostLocalMemory, FloatAddsMatchFloatArithmetic) {
  check_float_adds<float, std::uint32_t>(proxy_atomic_type::float32, 11);
  check_float_adds<double, std::uint64_t>(proxy_atomic_type::float64, 12);
}

TEST(HostLocalMemory, AtomicsSignalsAndCopiesMatchAModel) {
  std::vector<std::uint64_t> storage(64);
  host_local_memory memory(storage.data(), 512);
  std::mt19937_64 rng(5);
  for (auto& w : storage) w = rng();
  for (int i = 0; i < 2000; ++i) {
    const auto type = proxy_atomic_type(rng() % 4);
    const auto op = proxy_atomic_is_float(type) ? proxy_atomic_op(rng() % 3) : proxy_atomic_op(rng() % 12);
    const unsigned width = proxy_atomic_width(type);
    const std::uint64_t mask = width == 4 ? 0xffffffffull : ~0ull;
    const std::uint64_t offset = (rng() % (512 / width)) * width;
    std::uint64_t before = 0;
    std::memcpy(&before, reinterpret_cast<std::byte*>(storage.data()) + offset, width);
    local_atomic a{.op = op, .type = type, .value = proxy_atomic_has_operand(op) ? rng() & mask : 0};
    if (op == proxy_atomic_op::compare_swap) a.compare = rng() % 2 ? before : rng() & mask;
    std::uint64_t expected_after = before;
    switch (op) {
      case proxy_atomic_op::fetch: break;
      case proxy_atomic_op::set: case proxy_atomic_op::swap: expected_after = a.value; break;
      case proxy_atomic_op::compare_swap: expected_after = before == a.compare ? a.value : before; break;
      case proxy_atomic_op::fetch_add: case proxy_atomic_op::add: expected_after = (before + a.value) & mask; break;
      case proxy_atomic_op::fetch_and: case proxy_atomic_op::bit_and: expected_after = before & a.value; break;
      case proxy_atomic_op::fetch_or: case proxy_atomic_op::bit_or: expected_after = before | a.value; break;
      case proxy_atomic_op::fetch_xor: case proxy_atomic_op::bit_xor: expected_after = before ^ a.value; break;
    }
    std::uint64_t old = 0xdead;
    memory.atomic(offset, a, &old);
    std::uint64_t after = 0;
    std::memcpy(&after, reinterpret_cast<std::byte*>(storage.data()) + offset, width);
    ASSERT_EQ(old, before) << "op " << int(op) << " type " << int(type);
    ASSERT_EQ(after, expected_after) << "op " << int(op) << " type " << int(type);
  }
  storage[3] = 10;
  memory.signal(24, proxy_signal_op::add, 5);
  EXPECT_EQ(storage[3], 15u);
  memory.signal(24, proxy_signal_op::set, 7);
  EXPECT_EQ(storage[3], 7u);

  std::vector<std::byte> outside(100);
  for (auto& b : outside) b = std::byte(rng());
  memory.write(local_ref::heap(3), outside.data(), 100);
  std::vector<std::byte> back(100);
  memory.read(local_ref::address(reinterpret_cast<std::byte*>(storage.data()) + 3), back.data(), 100);
  EXPECT_EQ(back, outside);
  EXPECT_THROW(memory.read(local_ref::heap(500), back.data(), 13), error);
  EXPECT_THROW(memory.atomic(4, local_atomic{.type = proxy_atomic_type::int64}, &storage[0]), error);
}

// ---- loopback network ----

struct record {
  int from;
  std::uint32_t index;
};

// Byte k of message `index`'s payload: different in every message and position.
std::byte payload_byte(std::uint32_t index, std::size_t k) { return std::byte((index * 31 + k * 7 + 1) & 0xff); }

TEST(LoopbackNetwork, MessagesArriveInOrderPerPairAndEverythingRunsInProgress) {
  loopback_fabric fabric(3);
  auto a = fabric.connect(0), b = fabric.connect(1), c = fabric.connect(2);
  EXPECT_THROW(fabric.connect(1), error);
  std::vector<record> seen;
  c->on_message(
      5,
      [](void* ctx, const network_message& m) {
        std::uint32_t index;
        ASSERT_EQ(m.header.size(), 4u);
        std::memcpy(&index, m.header.data(), 4);
        ASSERT_EQ(m.payload.size(), index % 7);
        for (std::size_t k = 0; k < m.payload.size(); ++k)
          ASSERT_EQ(m.payload[k], payload_byte(index, k)) << "message " << index << ", byte " << k;
        static_cast<std::vector<record>*>(ctx)->push_back({m.from, index});
      },
      &seen);
  int done_a = 0;
  network_done count{[](void* ctx, network_status s, std::uint64_t) {
                       EXPECT_EQ(s, network_status::ok);
                       ++*static_cast<int*>(ctx);
                     },
                     &done_a};
  std::vector<std::array<std::byte, 7>> payloads(200);  // each message's own bytes, alive until the end
  for (std::uint32_t i = 0; i < 200; ++i) {
    for (std::size_t k = 0; k < 7; ++k) payloads[i][k] = payload_byte(i, k);
    network& from = i % 3 == 0 ? *b : *a;
    from.send(2, 5, {reinterpret_cast<const std::byte*>(&i), 4}, {payloads[i].data(), i % 7},
              i % 3 == 0 ? network_done{} : count);
  }
  EXPECT_TRUE(seen.empty());  // nothing runs outside progress()
  EXPECT_EQ(done_a, 0);
  EXPECT_TRUE(c->progress());
  EXPECT_TRUE(a->progress());
  EXPECT_EQ(done_a, 133);
  ASSERT_EQ(seen.size(), 200u);
  std::int64_t last[2] = {-1, -1};
  for (const record& r : seen) {
    ASSERT_GT(std::int64_t(r.index), last[r.from]) << "from PE " << r.from;
    last[r.from] = r.index;
  }
}

TEST(LoopbackNetwork, OneSidedOperationsOnExposedMemoryAndAKilledPe) {
  loopback_fabric fabric(3, {.reorder_completions = true});
  std::unique_ptr<network> nets[3] = {fabric.connect(0), fabric.connect(1), fabric.connect(2)};
  std::vector<std::uint64_t> memory[3];
  network_region regions[3];
  std::vector<std::thread> threads;
  for (int p = 0; p < 3; ++p) {
    memory[p].assign(64, 100 + p);
    threads.emplace_back([&, p] { regions[p] = nets[p]->expose(memory[p].data(), 512, memory_kind::host); });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(regions[0].id, regions[2].id);
  EXPECT_THROW(nets[0]->expose(nullptr, 0, memory_kind::cuda), error);

  struct results {
    int done = 0;
    std::uint64_t value = 0;
    network_status status = network_status::ok;
  } r;
  network_done note{[](void* ctx, network_status s, std::uint64_t v) {
                      auto* res = static_cast<results*>(ctx);
                      ++res->done;
                      if (v != 0) res->value = v;
                      if (s != network_status::ok) res->status = s;
                    },
                    &r};
  const std::uint64_t words[2] = {7, 8};
  nets[0]->put(1, words, 16, regions[0], 8, note);
  std::uint64_t got[2] = {};
  nets[0]->get(1, got, 16, regions[0], 8, note);
  nets[0]->atomic(2, network_atomic::add, 8, true, regions[0], 16, 5, 0, note);
  nets[0]->atomic(2, network_atomic::compare_swap, 4, false, regions[0], 0, 9, 102, note);
  nets[0]->flush(kNetworkAllPes, note);
  while (r.done < 5) nets[0]->progress();
  EXPECT_EQ(r.status, network_status::ok);
  EXPECT_EQ(memory[1][1], 7u);
  EXPECT_EQ(memory[1][2], 8u);
  EXPECT_EQ(got[0], 7u);
  EXPECT_EQ(got[1], 8u);
  EXPECT_EQ(r.value, 102u);  // the fetching add's old value
  EXPECT_EQ(memory[2][2], 107u);
  EXPECT_EQ(std::uint32_t(memory[2][0]), 9u);  // compare_swap on the low 32 bits matched 102
  EXPECT_THROW(nets[0]->put(1, words, 16, regions[0], 510, note), error);

  fabric.kill(2);
  EXPECT_TRUE(fabric.killed(2));
  r = {};
  nets[0]->send(2, 0, {}, {}, note);
  nets[0]->put(2, words, 8, regions[0], 0, note);
  nets[0]->flush(2, note);
  while (r.done < 3) nets[0]->progress();
  EXPECT_EQ(r.status, network_status::peer_failed);
  EXPECT_FALSE(nets[2]->progress());  // the dead PE is silent
  // expose() is collective over the live PEs only.
  threads.clear();
  for (int p = 0; p < 2; ++p) threads.emplace_back([&, p] { nets[p]->expose(memory[p].data(), 64, memory_kind::host); });
  for (auto& t : threads) t.join();
}

// Payload windows: a payload in the sender's window reaches a PE that kept a view of it by reference (the
// handler reads the sender's own bytes, and the send completes only once the payload is returned); a PE
// that refused the view, and a payload outside the window, get a copy and complete at once; a receiver
// that dies holding a borrowed payload fails the send.
TEST(LoopbackNetwork, PayloadWindowsLendByReferenceUntilReturned) {
  loopback_fabric fabric(3);
  std::unique_ptr<network> nets[3] = {fabric.connect(0), fabric.connect(1), fabric.connect(2)};
  std::span<std::byte> windows[3];
  std::vector<std::thread> threads;
  for (int p = 0; p < 3; ++p)
    threads.emplace_back([&, p] {
      // PE 2 refuses every view; PE 1 keeps them.
      const payload_view_check check{.fn = [](void* ctx, std::span<const std::byte>) { return ctx != nullptr; },
                                     .ctx = p == 2 ? nullptr : &fabric};
      windows[p] = nets[p]->open_payload_window(4096, check);
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(windows[0].size(), 4096u);
  std::mt19937_64 rng(3);
  for (std::byte& b : windows[0]) b = static_cast<std::byte>(rng());

  struct seen {
    // Borrowed payloads stay valid (the windows outlive the test); of copied ones only the address is used.
    std::vector<network_message> messages;
  } at[3];
  for (int p = 1; p < 3; ++p)
    nets[p]->on_message(
        2, [](void* ctx, const network_message& m) { static_cast<seen*>(ctx)->messages.push_back(m); }, &at[p]);
  int done = 0;
  network_status last = network_status::ok;
  struct tally {
    int* done;
    network_status* last;
  } t{&done, &last};
  const network_done note{[](void* ctx, network_status s, std::uint64_t) {
                            auto* c = static_cast<tally*>(ctx);
                            ++*c->done;
                            *c->last = s;
                          },
                          &t};

  const std::span<const std::byte> in_window = windows[0].subspan(100, 1000);
  nets[0]->send(1, 2, {}, in_window, note);
  nets[1]->progress();
  ASSERT_EQ(at[1].messages.size(), 1u);
  const network_message& m = at[1].messages[0];
  EXPECT_NE(m.borrowed, 0u);
  EXPECT_EQ(m.payload.data(), in_window.data()) << "read in place, not copied";
  EXPECT_EQ(m.payload.size(), in_window.size());
  nets[0]->progress();
  EXPECT_EQ(done, 0) << "the send completed before its payload was returned";
  nets[1]->return_borrowed(0, m.borrowed);
  nets[0]->progress();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(last, network_status::ok);

  // PE 2 refused the view, and this payload is not in the window: copies, complete at once.
  const std::vector<std::byte> outside(in_window.begin(), in_window.end());
  nets[0]->send(2, 2, {}, in_window, note);
  nets[0]->send(1, 2, {}, outside, note);
  nets[0]->progress();
  EXPECT_EQ(done, 3);
  nets[1]->progress();
  nets[2]->progress();
  ASSERT_EQ(at[2].messages.size(), 1u);
  ASSERT_EQ(at[1].messages.size(), 2u);
  for (const network_message& copy : {at[2].messages[0], at[1].messages[1]}) {
    EXPECT_EQ(copy.borrowed, 0u);
    EXPECT_NE(copy.payload.data(), in_window.data());
  }

  // A receiver that dies holding a borrowed payload: the send fails.
  nets[0]->send(1, 2, {}, in_window, note);
  nets[1]->progress();
  ASSERT_EQ(at[1].messages.size(), 3u);
  EXPECT_NE(at[1].messages[2].borrowed, 0u);
  fabric.kill(1);
  nets[0]->progress();
  EXPECT_EQ(done, 4);
  EXPECT_EQ(last, network_status::peer_failed);
}

}  // namespace
}  // namespace shoal::detail
