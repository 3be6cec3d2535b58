// shoal-ll-probe: where the time of one LL all-reduce call inside a kernel goes. Every variant makes
// back-to-back 4 KiB bfloat16 sums at grid scope on the CTA count an on-stream call would use (4 CTAs of
// 512 threads), as shoal-perf's in-kernel row does, and reports microseconds per call:
//   library      shoal::reduce(grid, ...), the call users make;
//   step         the library's LL step alone (the call's set-up, algorithm pick and range split left out);
//   step, timed  the same with cycle stamps by each CTA's thread 0 between its phases;
//   no counter   the step with its epoch kept in a register (the channel counter read once per kernel);
//   no source    the step without loading the source (a register value is sent), and no counter;
//   lines only   the lines alone: store them, poll them, no reduction, no store of the result.
// And the library's own code taken apart, to find what the call adds to its step:
//   ll direct    the library's set-up, then detail::reduce_ll called directly (no dispatch);
//   replica      a copy of shoal::reduce's body (should read as the library does);
//   replica: ... the same compiling only some of the algorithms (LL with the pick; LL and one-shot; LL and
//                two-shot; all three without the branch for teams across nodes), to find which of them
//                slow the LL call down by sharing its kernel;
//   padded: ...  the LL-only replica in a kernel as large as the library's, the rest code that never runs
//                (in the loop after each call, or after the loop): does the kernel's size alone slow it?
//   timed: ...   the full and the LL-only replica with cycle stamps by each CTA's thread 0 around the
//                set-up, the pick, the LL step and the finish: which part grows with the other algorithms?
//   counter: ... the full replica running LL through reduce_ll_copy, reading the channel's counter in the
//                step (as the library does) or first thing in the call, so that the set-up and the pick
//                run while the read is in flight (perf notes 53, 54);
//   given: ...   the full replica with its range, or its range and its algorithm, computed once per kernel
//                instead of per call: what the set-up and the pick cost a call (perf notes 55).
//   body         detail::reduce_ll alone, its range computed once per kernel (no set-up per call);
//   body, one load        a copy of reduce_ll that loads each source word once (for the line and the sum);
//   body, one word        that copy with one word per thread and step (no loops over words and chunks).
// Findings and the fixes they led to: docs/perf-notes.md, entries 42 and 43. Run under shoalrun with 2 PEs; PE 0
// prints the table.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_common.hpp"
#include "shoal/dev/coll.cuh"
#include "shoal/shoal.hpp"
#include "shoal/team.hpp"

namespace {

using bf16 = __nv_bfloat16;
constexpr int kCtas = 4, kThreads = 512, kPhases = 4;
constexpr std::size_t kCount = 2048;  // 4 KiB of bfloat16

__device__ inline std::uint64_t cycles() {
  std::uint64_t c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}

enum class variant {
  library,
  step,
  step_timed,
  no_counter,
  no_source,
  lines_only,
  ll_direct,
  replica,
  replica_ll,
  replica_ll_staged,
  replica_ll_pull,
  replica_within_node,
  padded_in_loop,
  padded_after_loop,
  replica_timed,
  replica_ll_timed,
  replica_copy,
  replica_counter_first,
  replica_range_given,
  replica_range_pick_given,
  body,
  body_one_load,
  body_one_word
};

struct results {
  unsigned long long start_ns, end_ns;        // earliest CTA start, latest CTA end
  unsigned long long phase_cycles[kPhases];   // summed over CTAs and calls (step_timed)
  unsigned long long cycles_total, ns_total;  // CTA 0's thread 0: clock rate
  unsigned long long bad;                     // result words that differ from the expected sum
};

// One LL step of a 4 KiB all-reduce on this CTA's channel and part, as detail::reduce_ll runs it.
template <variant V>
__device__ __forceinline__ void ll_step(const shoal::team_handle& t, int ch, bf16* dst, const bf16* src,
                                        shoal::detail::range r, std::uint64_t& epoch_reg, std::uint64_t* stamps) {
  using namespace shoal::detail;
  using unit = unit_steps<shoal::block_scope, false>;
  constexpr bool kTimed = V == variant::step_timed;
  const int n = t.size(), me = t.index;
  const std::size_t begin = r.begin * sizeof(bf16), end = r.end * sizeof(bf16);
  const auto* s = reinterpret_cast<const std::byte*>(src);
  auto* d = reinterpret_cast<std::byte*>(dst);
  std::uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  if (kTimed) c0 = cycles();
  if (V != variant::no_source && V != variant::lines_only)
    prefetch_first_words<unit>(begin, end, 1, [&](int) { return s; });
  std::uint64_t epoch;
  if (V == variant::library || V == variant::step || V == variant::step_timed)
    epoch = next_step(unit{}, t, ch, true).epoch;
  else
    epoch = ++epoch_reg;
  if (kTimed) c1 = cycles();
  const int parity = int(epoch & 1);
  const std::uint32_t flag = ll_flag(epoch);
  std::byte* my_lines = ll_lines_of(t, ch, parity, me);
  const std::size_t o = begin + 8 * std::size_t(unit::rank());
  if (o < end) {
    const std::size_t line = (o - begin) / 8 * 16;
    const std::uint64_t word = (V == variant::no_source || V == variant::lines_only) ? epoch : load_word(s + o, 8);
    for (int j = 0; j < n; ++j)
      if (j != me) ll_store(member_ptr(t, my_lines, j) + line, word, flag);
    if (kTimed) c2 = cycles();
    if (V == variant::lines_only) {
      for (int i = 0; i < n; ++i)
        if (i != me) (void)ll_load(t, ll_lines_of(t, ch, parity, i) + line, flag);
    } else {
      auto acc = acc_word<bf16, std::uint64_t>::from(word);
      for (int i = 0; i < n; ++i)
        if (i != me) acc.template add<shoal::reduce_op::sum>(ll_load(t, ll_lines_of(t, ch, parity, i) + line, flag));
      store_word(d + o, 8, acc.word());
    }
  } else if (kTimed) {
    c2 = cycles();
  }
  if (kTimed) c3 = cycles();
  unit::sync();
  if (kTimed) {
    const std::uint64_t c4 = cycles();
    stamps[0] += c1 - c0;  // prefetch, counter read, CTA barrier, counter store
    stamps[1] += c2 - c1;  // source word load, line stores issued
    stamps[2] += c3 - c2;  // wait for the peer's line, reduce, store the result
    stamps[3] += c4 - c3;  // closing CTA barrier
  }
}

// A copy of detail::reduce_ll (all-reduce: one source block, block_stride 0) with two simplifications
// that can be switched on: kOneLoad loads a word once for the line and the sum; kOneWord assumes one
// 8-byte word per thread and one chunk per call (true here) and drops the loops. With kWordGiven the first
// step takes the counter's word the caller read (`counter_word`) instead of reading it.
template <bool kOneLoad, bool kOneWord, bool kWordGiven = false>
__device__ __forceinline__ void reduce_ll_copy(const shoal::team_handle& t, int ch, bf16* dst_, const bf16* src_,
                                               shoal::detail::range r, std::uint64_t counter_word = 0) {
  using namespace shoal::detail;
  using Unit = unit_steps<shoal::block_scope, false>;
  const Unit unit{};
  const std::size_t payload = ll_payload(t);
  const int n = t.size(), me = t.index;
  const std::size_t begin = r.begin * sizeof(bf16), end_all = r.end * sizeof(bf16);
  const auto* src = reinterpret_cast<const std::byte*>(src_);
  auto* dst = reinterpret_cast<std::byte*>(dst_);
  for (std::size_t off = begin; off < end_all; off += payload) {
    const std::size_t end = off + payload < end_all ? off + payload : end_all;
    prefetch_first_words<Unit>(off, end, 1, [&](int) { return src; });
    // A word read before the set-up is still current: nothing writes the channel's counter in between.
    const step s =
        kWordGiven && off == begin ? step_from_word(unit, t, ch, counter_word, true) : next_step(unit, t, ch, true);
    const std::uint64_t epoch = s.epoch;
    const int parity = int(epoch & 1);
    const std::uint32_t flag = ll_flag(epoch);
    await_scratch_free(unit, t, ch, s, all_members);
    std::byte* my_lines = ll_lines_of(t, ch, parity, me);
    auto one = [&](std::size_t o, std::size_t m) {
      const std::size_t line = (o - off) / 8 * 16;
      const std::uint64_t word = load_word(src + o, m);
      for (int j = 0; j < n; ++j)
        if (j != me) ll_store(member_ptr(t, my_lines, j) + line, kOneLoad ? word : load_word(src + o, m), flag);
      auto acc = acc_word<bf16, std::uint64_t>::from(kOneLoad ? word : load_word(src + o, m));
      for (int i = 0; i < n; ++i)
        if (i != me) acc.template add<shoal::reduce_op::sum>(ll_load(t, ll_lines_of(t, ch, parity, i) + line, flag));
      store_word(dst + o, m, acc.word());
    };
    if constexpr (kOneWord) {
      const std::size_t o = off + 8 * std::size_t(Unit::rank());
      if (o < end) one(o, 8);
    } else {
      for (std::size_t o = off + 8 * std::size_t(Unit::rank()); o < end; o += 8 * std::size_t(Unit::size()))
        one(o, end - o < 8 ? end - o : 8);
    }
    Unit::sync();
    if constexpr (kOneWord) break;
  }
}

// The algorithms a replica of shoal::reduce compiles (a bit set), to find which of them make the LL call
// slower by being in the same kernel. Where the pick lands on an algorithm left out, the kernel traps.
enum algos : unsigned { kLL = 1, kStaged = 2, kPull = 4, kAcrossNodes = 8, kAll = 15 };

// How a replica runs its LL step: the library's reduce_ll, or reduce_ll_copy reading the channel's counter
// in the step or (counter_first) right after make_unit.
enum class ll_path { library, copy, counter_first };

// What a replica may take from its caller instead of computing per call (kGiven), and the values.
enum class given { nothing, range, range_and_pick };
struct given_values {
  shoal::detail::range r;
  shoal::algorithm chosen;
};

// shoal::reduce(grid, t, sum, dst, src, count) as the library writes it, compiling the algorithms of
// kHas; kAcrossNodes adds the branch on t.spans_nodes and the steps with the proxy's paths. Or (kDirect)
// the same set-up calling the LL step straight away, without the pick. With kTimed, each thread adds the
// cycles of the call's parts to stamps[0..3]: set-up (unit and range), pick (the model's choice and its fit
// to the unit), the LL step, the finish. kPath: how the LL step runs.
template <unsigned kHas, bool kDirect = false, bool kTimed = false, ll_path kPath = ll_path::library,
          given kGiven = given::nothing>
__device__ __forceinline__ void reduce_replica(const shoal::team_handle& t, bf16* dst, const bf16* src,
                                               std::size_t count, std::uint64_t* stamps = nullptr,
                                               given_values pre = {}) {
  using namespace shoal::detail;
  using shoal::algorithm;
  constexpr source_loads kLoads = source_loads::one_at_a_time;  // as the device API inside users' kernels
  std::uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  if constexpr (kTimed) c0 = cycles();
  const coll_unit u = make_unit(shoal::grid, t);
  if (!u.active) return;
  std::uint64_t counter_word = 0;
  if constexpr (kPath == ll_path::counter_first)
    counter_word = *const_cast<volatile std::uint64_t*>(t.calls + u.channel);
  const reduce_plan<bf16> plan{dst, src, count, 0};
  const range r = kGiven != given::nothing ? pre.r : split_range(count, 8, u.part, u.parts);
  if constexpr (kDirect) {
    reduce_ll<shoal::reduce_op::sum>(unit_steps<shoal::block_scope, false>{}, t, u.channel, plan, r);
    return;
  }
  if constexpr (kTimed) c1 = cycles();
  const algorithm chosen = kGiven == given::range_and_pick
                               ? pre.chosen
                               : t.pick_for_unit(shoal::collective::reduce, count * sizeof(bf16),
                                                 r.size() * sizeof(bf16), algorithm::two_shot);
  if constexpr (kTimed) c2 = cycles();
  auto run = [&](auto unit) {
    if constexpr (decltype(unit)::proxied) {
      reduce_staged<shoal::reduce_op::sum, kLoads>(unit, t, u.channel, plan, r);
    } else {
      switch (chosen) {
        case algorithm::ll:
          if constexpr (kPath == ll_path::library)
            reduce_ll<shoal::reduce_op::sum>(unit, t, u.channel, plan, r);
          else
            reduce_ll_copy<false, false, kPath == ll_path::counter_first>(t, u.channel, dst, src, r, counter_word);
          if constexpr (kTimed) c3 = cycles();
          break;
        case algorithm::one_shot:
          if constexpr ((kHas & kStaged) != 0)
            reduce_staged<shoal::reduce_op::sum, kLoads>(unit, t, u.channel, plan, r);
          else
            __trap();
          break;
        default: {
          if constexpr ((kHas & kPull) != 0) {
            const range mine = split_range(r.size(), 8, t.index, t.size());
            reduce_pull<shoal::reduce_op::sum, kLoads>(unit, t, u.channel, plan,
                                                       {r.begin + mine.begin, r.begin + mine.end}, 0, true);
          } else {
            __trap();
          }
          break;
        }
      }
    }
    finish_proxied(unit, t, r.size() * sizeof(bf16));
  };
  if constexpr ((kHas & kAcrossNodes) != 0)
    with_unit_steps(shoal::grid, t, run);
  else
    run(unit_steps<shoal::block_scope, false>{});
  if constexpr (kTimed) {
    const std::uint64_t c4 = cycles();
    stamps[0] += c1 - c0;
    stamps[1] += c2 - c1;
    stamps[2] += c3 - c2;
    stamps[3] += c4 - c3;
  }
}

// N dependent FMAs (volatile asm, so none is folded or dropped), inlined in halves so that the templates
// nest log2(N) deep.
template <int N>
__device__ __forceinline__ void fma_chain(float& x) {
  if constexpr (N == 1) {
    asm volatile("fma.rn.f32 %0, %0, 0f3F800347, 0f3F800000;" : "+f"(x));
  } else {
    fma_chain<N / 2>(x);
    fma_chain<N - N / 2>(x);
  }
}

// Code that never runs (its caller's condition is false at run time) but that the compiler must keep: 7,600
// FMAs on a loaded value, stored back. They bring the LL-only replica's kernel (~1,400 instructions) to the
// size of the library's (~9,000; perf notes 53).
__device__ __forceinline__ void padding(bf16* sink) {
  float x = __bfloat162float(sink[threadIdx.x]);
  fma_chain<7600>(x);
  sink[threadIdx.x] = __float2bfloat16(x);
}

template <variant V>
__global__ void __launch_bounds__(kThreads)
    probe_kernel(shoal::team_handle t, bf16* dst, const bf16* src, int iters, results* out) {
  using namespace shoal::detail;
  const int b = int(blockIdx.x), ch = t.channel_first + b;
  const range r = split_range(kCount, 8, b, int(gridDim.x));
  std::uint64_t epoch_reg = *const_cast<volatile std::uint64_t*>(t.calls + ch) & ~kSymmetricMark;
  __syncthreads();
  std::uint64_t stamps[kPhases] = {};
  const bool never = out->start_ns == 0;  // the host sets it to ~0 (the padded variants' dead branch)
  // The range and the algorithm of this CTA's calls, as a call computes them (the `given:` variants).
  const coll_unit pu = make_unit(shoal::grid, t);
  given_values pre{split_range(kCount, 8, pu.part, pu.parts), shoal::algorithm::ll};
  pre.chosen = t.pick_for_unit(shoal::collective::reduce, kCount * sizeof(bf16), pre.r.size() * sizeof(bf16),
                               shoal::algorithm::two_shot);
  const std::uint64_t t0 = global_timer_ns(), k0 = cycles();
  for (int i = 0; i < iters; ++i) {
    if constexpr (V == variant::library)
      shoal::reduce(shoal::grid, t, shoal::op::sum, dst, src, kCount);
    else if constexpr (V == variant::ll_direct)
      reduce_replica<kLL, true>(t, dst, src, kCount);
    else if constexpr (V == variant::replica)
      reduce_replica<kAll>(t, dst, src, kCount);
    else if constexpr (V == variant::replica_ll)
      reduce_replica<kLL>(t, dst, src, kCount);
    else if constexpr (V == variant::replica_ll_staged)
      reduce_replica<kLL | kStaged>(t, dst, src, kCount);
    else if constexpr (V == variant::replica_ll_pull)
      reduce_replica<kLL | kPull>(t, dst, src, kCount);
    else if constexpr (V == variant::replica_within_node)
      reduce_replica<kLL | kStaged | kPull>(t, dst, src, kCount);
    else if constexpr (V == variant::padded_in_loop || V == variant::padded_after_loop)
      reduce_replica<kLL>(t, dst, src, kCount);
    else if constexpr (V == variant::replica_timed)
      reduce_replica<kAll, false, true>(t, dst, src, kCount, stamps);
    else if constexpr (V == variant::replica_ll_timed)
      reduce_replica<kLL, false, true>(t, dst, src, kCount, stamps);
    else if constexpr (V == variant::replica_copy)
      reduce_replica<kAll, false, false, ll_path::copy>(t, dst, src, kCount);
    else if constexpr (V == variant::replica_counter_first)
      reduce_replica<kAll, false, false, ll_path::counter_first>(t, dst, src, kCount);
    else if constexpr (V == variant::replica_range_given)
      reduce_replica<kAll, false, false, ll_path::library, given::range>(t, dst, src, kCount, nullptr, pre);
    else if constexpr (V == variant::replica_range_pick_given)
      reduce_replica<kAll, false, false, ll_path::library, given::range_and_pick>(t, dst, src, kCount, nullptr, pre);
    else if constexpr (V == variant::body)
      reduce_ll<shoal::reduce_op::sum>(unit_steps<shoal::block_scope, false>{}, t, ch,
                                       reduce_plan<bf16>{dst, src, kCount, 0}, r);
    else if constexpr (V == variant::body_one_load)
      reduce_ll_copy<true, false>(t, ch, dst, src, r);
    else if constexpr (V == variant::body_one_word)
      reduce_ll_copy<true, true>(t, ch, dst, src, r);
    else
      ll_step<V>(t, ch, dst, src, r, epoch_reg, stamps);
    if constexpr (V == variant::padded_in_loop)
      if (never) padding(dst);
  }
  if constexpr (V == variant::padded_after_loop)
    if (never) padding(dst);
  const std::uint64_t t1 = global_timer_ns(), k1 = cycles();
  if (V == variant::no_counter || V == variant::no_source || V == variant::lines_only) {
    if (threadIdx.x == 0) t.calls[ch] = epoch_reg | kSymmetricMark;  // the calls made, for the next kernel
  }
  if (threadIdx.x == 0) {
    atomicMin(&out->start_ns, static_cast<unsigned long long>(t0));
    atomicMax(&out->end_ns, static_cast<unsigned long long>(t1));
    for (int k = 0; k < kPhases; ++k) atomicAdd(&out->phase_cycles[k], static_cast<unsigned long long>(stamps[k]));
    if (b == 0) out->cycles_total = k1 - k0, out->ns_total = t1 - t0;
  }
}

// Expected word of the sum check: every PE's source holds the same random values, so dst = 2 x src.
__global__ void check_kernel(const bf16* dst, const bf16* src, int n_pes, results* out) {
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < kCount; k += gridDim.x * blockDim.x) {
    const float want = __bfloat162float(src[k]) * float(n_pes), got = __bfloat162float(dst[k]);
    if (fabsf(got - want) > 1e-2f * fabsf(want) + 1e-3f) atomicAdd(&out->bad, 1ull);
  }
}

template <variant V>
void launch(const shoal::team_handle& h, bf16* dst, const bf16* src, int iters, results* out) {
  probe_kernel<V><<<kCtas, kThreads>>>(h, dst, src, iters, out);
  PROBE_CUDA(cudaGetLastError());
}

struct row {
  const char* name;
  variant v;
  void (*launch)(const shoal::team_handle&, bf16*, const bf16*, int, results*);  // launch<v>
};

template <variant V>
constexpr row row_of(const char* name) {
  return {name, V, &launch<V>};
}

int run() {
  shoal::world w = shoal::init();
  if (w.n_pes() != 2) {
    std::printf("shoal-ll-probe needs exactly 2 PEs (have %d)\n", w.n_pes());
    return w.n_pes() == 1 ? 0 : 2;
  }
  const shoal::team& team = shoal::world_team(w);
  const shoal::team_handle h = team.device_handle();
  auto* src = static_cast<bf16*>(w.malloc(kCount * sizeof(bf16)));
  auto* dst = static_cast<bf16*>(w.malloc(kCount * sizeof(bf16)));
  std::vector<bf16> host(kCount);
  std::uint32_t x = 12345;  // the same random values on every PE
  for (auto& e : host) e = __float2bfloat16(float((x = x * 1664525u + 1013904223u) >> 20) / 4096.0f - 128.0f);
  PROBE_CUDA(cudaMemcpy(src, host.data(), kCount * sizeof(bf16), cudaMemcpyHostToDevice));
  results* out = nullptr;
  PROBE_CUDA(cudaMallocManaged(&out, sizeof(results)));

  const row rows[] = {row_of<variant::library>("library: shoal::reduce(grid)"),
                      row_of<variant::step>("step: the LL step alone"),
                      row_of<variant::step_timed>("step, timed"),
                      row_of<variant::no_counter>("no counter (epoch in a register)"),
                      row_of<variant::no_source>("no source load, no counter"),
                      row_of<variant::lines_only>("lines only (no reduce, no result store)"),
                      row_of<variant::ll_direct>("ll direct: set-up, then reduce_ll"),
                      row_of<variant::replica>("replica of shoal::reduce"),
                      row_of<variant::replica_ll>("replica: LL only, with the pick"),
                      row_of<variant::replica_ll_staged>("replica: LL and one-shot"),
                      row_of<variant::replica_ll_pull>("replica: LL and two-shot"),
                      row_of<variant::replica_within_node>("replica: all three, no across-node branch"),
                      row_of<variant::padded_in_loop>("padded: LL only, dead code in the loop"),
                      row_of<variant::padded_after_loop>("padded: LL only, dead code after it"),
                      row_of<variant::replica_timed>("timed: replica of shoal::reduce"),
                      row_of<variant::replica_ll_timed>("timed: replica, LL only"),
                      row_of<variant::replica_copy>("counter: replica, LL copy, read in step"),
                      row_of<variant::replica_counter_first>("counter: replica, LL copy, read first"),
                      row_of<variant::replica_range_given>("given: replica, range once per kernel"),
                      row_of<variant::replica_range_pick_given>("given: replica, range and pick once"),
                      row_of<variant::body>("body: reduce_ll, range set once"),
                      row_of<variant::body_one_load>("body, one load per word"),
                      row_of<variant::body_one_word>("body, one load, one word (no loops)")};
  const int kIters = 20000, kReps = 5;
  for (const row& r : rows) {
    std::vector<double> per_call_us;
    std::vector<double> phase_ns[kPhases];
    unsigned long long bad = 0;
    for (int rep = 0; rep < kReps; ++rep) {
      *out = results{~0ull, 0, {}, 0, 0, 0};
      shoal::barrier_all(w);
      r.launch(h, dst, src, kIters, out);
      PROBE_CUDA(cudaDeviceSynchronize());
      per_call_us.push_back(double(out->end_ns - out->start_ns) / kIters / 1e3);
      const double ns_per_cycle = double(out->ns_total) / double(out->cycles_total);
      for (int k = 0; k < kPhases; ++k)
        phase_ns[k].push_back(double(out->phase_cycles[k]) * ns_per_cycle / (double(kCtas) * kIters));
      if (r.v != variant::no_source && r.v != variant::lines_only) {
        check_kernel<<<4, 256>>>(dst, src, w.n_pes(), out);
        PROBE_CUDA(cudaGetLastError());
        PROBE_CUDA(cudaDeviceSynchronize());
        bad += out->bad;
      }
    }
    using shoal::probe::median;
    if (w.pe() == 0) {
      std::printf("%-42s %.3f us per call%s", r.name, median(per_call_us), bad != 0 ? "  WRONG RESULT" : "");
      if (r.v == variant::step_timed)
        std::printf("  [counter %.0f | source + lines out %.0f | peer's lines + result %.0f | closing sync %.0f ns]",
                    median(phase_ns[0]), median(phase_ns[1]), median(phase_ns[2]), median(phase_ns[3]));
      if (r.v == variant::replica_timed || r.v == variant::replica_ll_timed)
        std::printf("  [set-up %.0f | pick %.0f | LL step %.0f | finish %.0f ns]", median(phase_ns[0]),
                    median(phase_ns[1]), median(phase_ns[2]), median(phase_ns[3]));
      std::printf("\n");
    }
    if (bad != 0) return 1;
  }
  shoal::barrier_all(w);
  w.free(dst);
  w.free(src);
  PROBE_CUDA(cudaFree(out));
  return 0;
}

}  // namespace

int main() { return shoal::probe::main_reporting_errors(run); }
