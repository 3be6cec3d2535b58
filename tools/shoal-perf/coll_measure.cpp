// The on-stream half of the collectives' measurements (loop and graph replay), batch timing aligned on
// the device, graph capture, the host reference check, rows, and the heap budget of the suite.
#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "coll.hpp"
#include "coll/copy_engine_reduce.hpp"  // which on-stream calls the copy engines carry, for the rows' algo
#include "coll/stream_common.hpp"  // plan_launch: the on-stream collectives' launch shape
#include "shoal/bootstrap.hpp"
#include "shoal/coll_stream.hpp"
#include "shoal/team.hpp"
#include "suites.hpp"

namespace shoal::perf {

namespace {

constexpr std::uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;
constexpr std::byte kPoison{0xA5};
constexpr std::uint64_t kGpuHeadroom = 2 * kGiB;  // NCCL's buffers, graphs, the check's scratch



// ---- the seeded data of the checks -------------------------------------------------------------------

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// PE p's data for one check: word w of its source is mix(base + w), base differing per seed and PE.
struct pe_stream {
  std::uint64_t base;
  pe_stream(std::uint64_t seed, int pe) : base(mix(seed * 4096 + std::uint64_t(pe))) {}
  std::uint64_t word(std::uint64_t w) const { return mix(base + w); }
};

// Reads a PE's stream in order, one mix per word: byte i (never zero), or reduction element i (+-k/8
// with 1 <= k <= kmax; with kmax = 255 / n, every partial sum of n such values is a multiple of 1/8 below
// 32 in magnitude, exact in bfloat16 (8 significant bits) and in float, so the result depends neither on
// the order of the additions nor on where they round).
struct cursor {
  const pe_stream* stream = nullptr;
  std::uint64_t w = ~0ull, v = 0;
  std::uint64_t word(const pe_stream& s, std::uint64_t index) {
    if (&s != stream || index != w) {
      stream = &s;
      w = index;
      v = s.word(index);
    }
    return v;
  }
  std::byte byte_at(const pe_stream& s, std::uint64_t i) {
    const auto b = static_cast<unsigned char>(word(s, i / 8) >> (i % 8 * 8));
    return std::byte{b == 0 ? static_cast<unsigned char>(0x5A) : b};
  }
  float value_at(const pe_stream& s, std::uint64_t i, int kmax) {
    const auto u = static_cast<std::uint32_t>(word(s, i / 4) >> (i % 4 * 16)) & 0xFFFFu;
    const int k = 1 + int(u & 0x7FFFu) % kmax;
    return static_cast<float>(u & 0x8000u ? -k : k) / 8.0f;
  }
};

std::uint16_t bf16_bits(float v) {  // exact for the values above: their low 16 float bits are zero
  std::uint32_t u = 0;
  std::memcpy(&u, &v, sizeof u);
  return static_cast<std::uint16_t>(u >> 16);
}
float bf16_value(std::uint16_t bits) {
  const std::uint32_t u = std::uint32_t(bits) << 16;
  float v = 0;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

int kmax_for(int n_pes) { return std::max(1, 255 / n_pes); }

// Runs fn(begin, end) over [0, n) on a few threads (the PEs of a node share the host's cores). Each
// chunk starts on a multiple of `align`.
void parallel_for(std::uint64_t n, std::uint64_t align, int local_pes,
                  const std::function<void(std::uint64_t, std::uint64_t, int)>& fn) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  int threads = std::clamp(int(cores) / std::max(1, local_pes), 1, 16);
  if (n < (1u << 20)) threads = 1;
  const std::uint64_t chunk = round_up((n + threads - 1) / threads, align);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) {
    const std::uint64_t begin = std::min(n, chunk * i), end = std::min(n, chunk * (i + 1));
    pool.emplace_back(fn, begin, end, i);
  }
  fn(0, std::min(n, chunk), 0);
  for (std::thread& t : pool) t.join();
}

// This PE's source for a check.
void fill_source(std::byte* out, collective op, std::uint64_t src_bytes, const pe_stream& mine, int n_pes, int locals) {
  if (op == collective::reduce || op == collective::reducescatter) {
    const int kmax = kmax_for(n_pes);
    parallel_for(src_bytes / kCollElemBytes, 4, locals, [&](std::uint64_t b, std::uint64_t e, int) {
      cursor c;
      for (std::uint64_t i = b; i < e; ++i) {
        const std::uint16_t bits = bf16_bits(c.value_at(mine, i, kmax));
        std::memcpy(out + i * kCollElemBytes, &bits, sizeof bits);
      }
    });
  } else {
    parallel_for(src_bytes, 8, locals, [&](std::uint64_t b, std::uint64_t e, int) {
      cursor c;
      for (std::uint64_t i = b; i < e; ++i) out[i] = c.byte_at(mine, i);
    });
  }
}

struct mismatch {
  std::uint64_t count = 0;
  std::uint64_t first = ~0ull;
  std::string what;  // of the first
};

// Compares this PE's dst (and the guard after it) with the reference built from every PE's stream.
mismatch compare(const std::byte* got, collective op, std::uint64_t bytes, std::uint64_t dst_bytes, int me,
                 const std::vector<pe_stream>& pes, int locals) {
  const int n = int(pes.size());
  std::vector<mismatch> per_thread(16);
  // Counts a wrong value; true when it is the first one (the lowest index) the text is kept for.
  auto wrong = [](mismatch& m, std::uint64_t at) {
    if (m.count++ != 0 && at >= m.first) return false;
    m.first = at;
    return true;
  };
  if (op == collective::reduce || op == collective::reducescatter) {
    const int kmax = kmax_for(n);
    const std::uint64_t first = op == collective::reducescatter ? std::uint64_t(me) * (bytes / kCollElemBytes) : 0;
    parallel_for(dst_bytes / kCollElemBytes, 4, locals, [&](std::uint64_t b, std::uint64_t e, int t) {
      std::vector<cursor> cursors(pes.size());
      for (std::uint64_t i = b; i < e; ++i) {
        float want = 0;
        for (std::size_t p = 0; p < pes.size(); ++p) want += cursors[p].value_at(pes[p], first + i, kmax);
        std::uint16_t bits = 0;
        std::memcpy(&bits, got + i * kCollElemBytes, sizeof bits);
        if (bf16_value(bits) != want && wrong(per_thread[t], i * kCollElemBytes))
          per_thread[t].what =
              fmt::format("element {}: got {:g} (0x{:04x}), want {:g}", i, bf16_value(bits), bits, want);
      }
    });
  } else {
    parallel_for(dst_bytes, 8, locals, [&](std::uint64_t b, std::uint64_t e, int t) {
      cursor c;
      for (std::uint64_t i = b; i < e; ++i) {
        std::byte want{};
        if (op == collective::broadcast) {
          want = c.byte_at(pes[kBroadcastRoot], i);
        } else {
          const std::uint64_t from = i / bytes, at = i % bytes;  // block `from` of dst came from PE `from`
          want = c.byte_at(pes[from], op == collective::fcollect ? at : std::uint64_t(me) * bytes + at);
        }
        if (got[i] != want && wrong(per_thread[t], i))
          per_thread[t].what = fmt::format("byte {}: got 0x{:02x}, want 0x{:02x}", i, unsigned(got[i]), unsigned(want));
      }
    });
  }
  mismatch all;
  for (const mismatch& m : per_thread) {
    if (m.count == 0) continue;
    if (wrong(all, m.first)) all.what = m.what;
    all.count += m.count - 1;
  }
  for (std::uint64_t g = 0; g < kGuardBytes; ++g)
    if (got[dst_bytes + g] != kPoison && wrong(all, dst_bytes + g))
      all.what = fmt::format("guard byte {} after dst overwritten", g);
  return all;
}

// PE 0 learns every PE's count; the note names the first PE that saw a wrong value.
coll_check_outcome gather_outcome(context& ctx, const mismatch& m, std::uint64_t dst_bytes) {
  std::array<char, 240> mine{};
  if (m.count > 0) {
    const std::string text = fmt::format("PE {}: {} wrong values in {} bytes of dst and guard; first {}", ctx.pe,
                                         m.count, dst_bytes + kGuardBytes, m.what);
    std::memcpy(mine.data(), text.data(), std::min(text.size(), mine.size() - 1));
  }
  std::vector<char> all(mine.size() * std::size_t(ctx.n_pes));
  ctx.world.bootstrap().all_gather(mine.data(), all.data(), mine.size());
  coll_check_outcome out{check_result::ok, ""};
  for (int p = 0; p < ctx.n_pes; ++p) {
    const char* text = all.data() + std::size_t(p) * mine.size();
    if (*text == '\0') continue;
    out.result = check_result::failed;
    if (out.note.empty()) out.note = text;
  }
  return out;
}

const char* mode_text(coll_mode m) {
  switch (m) {
    case coll_mode::stream:
      return "per call, back-to-back calls on a stream";
    case coll_mode::graph:
      return "per call, CUDA graph replay of back-to-back calls";
    case coll_mode::grid:
      return "per call, back-to-back calls in one kernel (grid scope)";
    case coll_mode::block:
      return "per call, back-to-back calls in one kernel (one block)";
    case coll_mode::grid_ll:
      return "per call, back-to-back calls in one kernel (grid scope, shoal::ll_only)";
  }
  return "?";
}

// One on-stream call of `op` on the given slot's buffers.
void enqueue_on_stream(context& ctx, const team& t, collective op, std::uint64_t bytes, std::byte* dst,
                       const std::byte* src) {
  using bf16 = __nv_bfloat16;
  const std::size_t count = bytes / kCollElemBytes;
  switch (op) {
    case collective::reduce:
      shoal::reduce_on_stream(t, reinterpret_cast<bf16*>(dst), reinterpret_cast<const bf16*>(src), count,
                              reduce_op::sum, ctx.stream);
      break;
    case collective::reducescatter:
      shoal::reducescatter_on_stream(t, reinterpret_cast<bf16*>(dst), reinterpret_cast<const bf16*>(src), count,
                                     reduce_op::sum, ctx.stream);
      break;
    case collective::fcollect:
      shoal::fcollect_bytes_on_stream(t, dst, src, bytes, ctx.stream);
      break;
    case collective::alltoall:
      shoal::alltoall_bytes_on_stream(t, dst, src, bytes, ctx.stream);
      break;
    case collective::broadcast:
      shoal::broadcast_bytes_on_stream(t, dst, src, bytes, kBroadcastRoot, ctx.stream);
      break;
    case collective::barrier:
      shoal::barrier_on_stream(t, ctx.stream);
      break;
  }
}

}  // namespace

// ---- names, sizes, options -----------------------------------------------------------------------------

coll_options& coll_settings() {
  static coll_options options;
  return options;
}

const char* to_string(coll_mode m) {
  switch (m) {
    case coll_mode::stream:
      return "stream";
    case coll_mode::graph:
      return "graph";
    case coll_mode::grid:
      return "grid";
    case coll_mode::block:
      return "block";
    case coll_mode::grid_ll:
      return "grid_ll";
  }
  return "?";
}

std::string coll_name(collective op) { return std::string(to_string(op)); }

std::uint64_t coll_src_bytes(collective op, std::uint64_t bytes, int n_pes) {
  const auto n = std::uint64_t(n_pes);
  switch (op) {
    case collective::reducescatter:
    case collective::alltoall:
      return n * bytes;
    case collective::barrier:
      return 0;
    default:
      return bytes;
  }
}

std::uint64_t coll_dst_bytes(collective op, std::uint64_t bytes, int n_pes) {
  const auto n = std::uint64_t(n_pes);
  switch (op) {
    case collective::fcollect:
    case collective::alltoall:
      return n * bytes;
    case collective::barrier:
      return 0;
    default:
      return bytes;
  }
}

std::uint64_t coll_size_bytes(collective op, std::uint64_t bytes, int n_pes) {
  return std::max(coll_src_bytes(op, bytes, n_pes), coll_dst_bytes(op, bytes, n_pes));
}

std::uint64_t coll_buffer_bytes(collective op, std::uint64_t bytes, int n_pes) {
  return std::max<std::uint64_t>(1, coll_size_bytes(op, bytes, n_pes));
}

bool coll_size_valid(collective op, std::uint64_t bytes) {
  if (op == collective::barrier) return true;
  if (op == collective::reduce || op == collective::reducescatter)
    return bytes >= kCollElemBytes && bytes % kCollElemBytes == 0;
  return bytes >= 1;
}

namespace {
// The algorithm the device runs for large calls of `op` (barrier: its only one, asked of no model).
algorithm large_algorithm(collective op) {
  if (op == collective::barrier) return algorithm::one_shot;
  return op == collective::reduce ? algorithm::two_shot : algorithm::direct;
}
}  // namespace

algorithm coll_pick(const team_handle& h, collective op, std::uint64_t bytes) {
  if (op == collective::barrier) return large_algorithm(op);
  return h.pick(op, bytes, large_algorithm(op));
}

algorithm coll_pick_one_block(const team_handle& h, collective op, std::uint64_t bytes) {
  const algorithm picked = coll_pick(h, op, bytes);
  if (op == collective::barrier || h.keeps_algorithm(op, picked, bytes)) return picked;
  return large_algorithm(op);
}

launch_shape coll_launch_shape(const team_handle& h, collective op, algorithm algo, std::uint64_t bytes, int n_pes) {
  const detail::coll_launch l = detail::plan_launch(h, algo, bytes, coll_size_bytes(op, bytes, n_pes));
  return {.ctas = int(l.ctas), .threads = int(l.threads)};
}

std::int64_t coll_ops(const context& ctx, std::uint64_t bytes) {
  if (ctx.opt.iters > 0) return ctx.opt.iters;
  return static_cast<std::int64_t>(std::clamp<std::uint64_t>(kGiB / std::max<std::uint64_t>(bytes, 1), 4, 1000));
}

std::uint64_t coll_arenas_bytes(const context& ctx, std::uint64_t buffer) {
  return 2 * ctx.arena_bytes_for(buffer);  // src and dst
}

std::uint64_t coll_heap_room(context& ctx) {
  const heap_stats s = ctx.world.heap_usage();
  std::size_t free_bytes = 0, total_bytes = 0;
  SHOAL_PERF_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double held = 2.0 * double(ctx.arena_bytes());  // the arenas are freed before they grow
  const double heap_room = double(s.max_size) - double(s.used) + held;
  const double gpu_room = double(free_bytes) + double(s.mapped) - double(s.used) + held - double(kGpuHeadroom);
  const double room = std::max(0.0, std::min(heap_room, gpu_room));
  return static_cast<std::uint64_t>(-ctx.max_over_pes({-room})[0]);
}

// ---- timing and graphs ---------------------------------------------------------------------------------

std::vector<double> time_coll_batches(context& ctx, std::int64_t ops, const std::function<void(int)>& enqueue) {
  const team& t = world_team(ctx.world);
  const std::vector<double> ms = time_batches(ctx, enqueue, [&] { shoal::barrier_on_stream(t, ctx.stream); });
  std::vector<double> us = ctx.max_over_pes(ms);
  for (double& v : us) v = v * 1e3 / static_cast<double>(ops);
  return us;
}

coll_graph::coll_graph(context& ctx, std::int64_t calls, const std::function<void(std::int64_t)>& enqueue) {
  std::string why;
  cudaError_t status = cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal);
  if (status != cudaSuccess) {
    why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(status);
  } else {
    try {
      for (std::int64_t k = 0; k < calls; ++k) enqueue(k);
    } catch (const std::exception& e) {
      why = e.what();
    }
    cudaGraph_t graph = nullptr;
    status = cudaStreamEndCapture(ctx.stream, &graph);
    if (status != cudaSuccess && why.empty()) why = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(status);
    if (why.empty()) {
      status = cudaGraphInstantiate(&exec_, graph, 0);
      if (status != cudaSuccess) {
        why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(status);
        exec_ = nullptr;
      } else if ((status = cudaGraphUpload(exec_, ctx.stream)) != cudaSuccess) {
        why = std::string("cudaGraphUpload: ") + cudaGetErrorString(status);
      }
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();  // a failed capture leaves its error behind; it is reported through error()
  const int failed = why.empty() ? 0 : 1;
  std::vector<int> all(std::size_t(ctx.n_pes));
  ctx.world.bootstrap().all_gather(&failed, all.data(), sizeof failed);
  int first_failed = -1;
  for (int p = 0; p < ctx.n_pes && first_failed < 0; ++p)
    if (all[std::size_t(p)] != 0) first_failed = p;
  if (first_failed >= 0) {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
    error_ = failed ? fmt::format("PE {}: {}", ctx.pe, why) : fmt::format("capture failed on PE {}", first_failed);
  }
  ctx.sync_stream();
}

coll_graph::~coll_graph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);  // cleanup path: nothing to do about a failure here
}

void coll_graph::launch(cudaStream_t stream) const { SHOAL_PERF_CUDA(cudaGraphLaunch(exec_, stream)); }

coll_batch_graphs::coll_batch_graphs(context& ctx, std::int64_t calls, std::uint32_t n_slots,
                                     const std::function<void(std::uint64_t slot)>& enqueue) {
  // Batch b starts on slot b x calls mod n_slots; those starts repeat with this period.
  const std::uint64_t period = n_slots / std::gcd(std::uint64_t(calls), std::uint64_t(n_slots));
  const std::uint64_t count = std::min<std::uint64_t>(period, std::uint64_t(ctx.opt.warmup + ctx.opt.reps));
  for (std::uint64_t b = 0; b < count; ++b) {
    graphs_.push_back(std::make_unique<coll_graph>(
        ctx, calls, [&](std::int64_t k) { enqueue((b * std::uint64_t(calls) + std::uint64_t(k)) % n_slots); }));
    if (!graphs_.back()->ok()) {  // every PE sees the same outcome (coll_graph is collective)
      error_ = graphs_.back()->error();
      graphs_.clear();
      return;
    }
  }
}

void coll_batch_graphs::launch(int batch, cudaStream_t stream) const {
  graphs_[std::size_t(batch) % graphs_.size()]->launch(stream);
}

// ---- correctness ---------------------------------------------------------------------------------------

coll_check_outcome check_coll(context& ctx, collective op, std::uint64_t bytes, const std::function<void()>& run) {
  const int n = ctx.n_pes, me = ctx.pe;
  const int locals = ctx.world.bootstrap().local_size();
  const std::uint64_t seed = ctx.next_seed();
  const std::uint64_t src_bytes = coll_src_bytes(op, bytes, n), dst_bytes = coll_dst_bytes(op, bytes, n);
  std::vector<pe_stream> pes;
  for (int p = 0; p < n; ++p) pes.emplace_back(seed, p);

  std::unique_ptr<std::byte[]> host(new std::byte[std::max(src_bytes, dst_bytes + kGuardBytes)]);
  fill_source(host.get(), op, src_bytes, pes[std::size_t(me)], n, locals);
  SHOAL_PERF_CUDA(cudaMemcpyAsync(ctx.src(), host.get(), src_bytes, cudaMemcpyHostToDevice, ctx.stream));
  SHOAL_PERF_CUDA(cudaMemsetAsync(ctx.dst(), int(kPoison), dst_bytes + kGuardBytes, ctx.stream));
  ctx.barrier();
  run();
  ctx.barrier();
  SHOAL_PERF_CUDA(cudaMemcpyAsync(host.get(), ctx.dst(), dst_bytes + kGuardBytes, cudaMemcpyDeviceToHost, ctx.stream));
  ctx.sync_stream();
  return gather_outcome(ctx, compare(host.get(), op, bytes, dst_bytes, me, pes, locals), dst_bytes);
}

// ---- measurements and rows -----------------------------------------------------------------------------

coll_result measure_coll(context& ctx, const coll_case& c) {
  if (!coll_size_valid(c.op, c.bytes))
    throw std::invalid_argument(
        fmt::format("{} of {} bytes: not a whole number of {} elements", coll_name(c.op), c.bytes, kCollElemName));
  return c.mode == coll_mode::stream || c.mode == coll_mode::graph ? measure_coll_on_stream(ctx, c)
                                                                   : measure_coll_in_kernel(ctx, c);
}

// On-stream rows up to this size also report their time with the calls queued ahead of the GPU.
constexpr std::uint64_t kQueuedMaxBytes = 1 << 20;

coll_result measure_coll_on_stream(context& ctx, const coll_case& c) {
  if (c.force) throw std::invalid_argument("on-stream collectives take the model's algorithm (SHOAL_ALGO_* forces)");
  const team& t = world_team(ctx.world);
  const std::uint64_t buffer = coll_buffer_bytes(c.op, c.bytes, ctx.n_pes);
  ctx.reserve(buffer);
  const std::uint64_t stride = context::slot_stride(buffer);
  const std::uint32_t n_slots = ctx.n_slots(buffer);
  auto enqueue_one = [&](std::uint64_t slot) {
    enqueue_on_stream(ctx, t, c.op, c.bytes, ctx.dst() + slot * stride, ctx.src() + slot * stride);
  };
  const bool barrier = c.op == collective::barrier;
  const std::int64_t ops = barrier ? (ctx.opt.iters > 0 ? ctx.opt.iters : 1000) : coll_ops(ctx, c.bytes);

  coll_result r;
  r.algo = coll_pick(t.device_handle(), c.op, c.bytes);
  if (c.op == collective::reduce || c.op == collective::reducescatter)
    r.copy_engines = detail::reduces_with_copy_engines(t, c.op, r.algo, ctx.dst(), ctx.src(), c.bytes);
  else if (!barrier)
    r.copy_engines = detail::exchanges_with_copy_engines(t, r.algo, c.bytes);
  if (barrier) {  // the team's meeting kernel: one warp
    r.ctas = 1;
    r.threads = 32;
  } else if (!r.copy_engines && r.algo != algorithm::hierarchical) {  // one kernel of the call's own
    const launch_shape shape = coll_launch_shape(t.device_handle(), c.op, r.algo, c.bytes, ctx.n_pes);
    r.ctas = shape.ctas;
    r.threads = shape.threads;
  }
  r.m.ops = ops;
  r.m.note = "slowest PE";
  auto check = [&](const std::function<void()>& once) {
    if (!ctx.opt.check) return;
    const coll_check_outcome o =
        barrier ? check_barrier_on_stream(ctx, 100, once) : check_coll(ctx, c.op, c.bytes, [&] {
          once();
          ctx.sync_stream();
        });
    r.m.check = o.result;
    if (!o.note.empty()) r.m.note += "; " + o.note;
  };

  if (c.mode == coll_mode::stream) {
    std::uint64_t next_slot = 0;
    r.m.t = summarize(time_coll_batches(ctx, ops, [&](int) {
      for (std::int64_t k = 0; k < ops; ++k) enqueue_one(next_slot++ % n_slots);
    }));
    // Up to 1 MiB a loop of calls can be bound by the host's enqueue rate: say what the GPU takes apart from it.
    if (c.bytes <= kQueuedMaxBytes) {
      r.m.note += "; " + describe(time_queued_calls(
                             ctx, int(std::min<std::int64_t>(ops, kQueuedCalls)), [&] { enqueue_one(next_slot++ % n_slots); },
                             [&] { enqueue_one(next_slot++ % n_slots); }));
    }
    check([&] { enqueue_one(0); });
    return r;
  }

  const coll_batch_graphs graphs(ctx, ops, n_slots, enqueue_one);
  if (!graphs.ok()) {
    r.m.check = check_result::failed;
    r.m.note = "graph capture failed: " + graphs.error();
    return r;
  }
  r.m.t = summarize(time_coll_batches(ctx, ops, [&](int batch) { graphs.launch(batch, ctx.stream); }));
  r.m.note += fmt::format("; {} graphs of {} calls, each over its batch's slots", graphs.size(), ops);
  if (ctx.opt.check) {
    // A graph of one call, replayed once before the checked replay: state a call leaves behind (epochs,
    // flags) must let the same captured call run again.
    const coll_graph one(ctx, 1, [&](std::int64_t) { enqueue_one(0); });
    if (!one.ok()) {
      r.m.check = check_result::failed;
      r.m.note += "; graph capture of the check failed: " + one.error();
      return r;
    }
    one.launch(ctx.stream);
    ctx.barrier();
    check([&] { one.launch(ctx.stream); });
  }
  return r;
}

row coll_row(const context& ctx, const coll_case& c, const coll_result& r) {
  row out;
  out.op = coll_name(c.op);
  out.scope = to_string(c.mode);
  const bool barrier = c.op == collective::barrier;
  // The barrier has one mechanism, a meeting on flags (named as the world barrier's rows name it).
  out.algo = barrier ? "flags" : std::string(to_string(r.algo)) + (r.copy_engines ? "+ce" : "");
  out.metric = barrier ? "latency" : "bandwidth";
  out.what = mode_text(c.mode);
  if (c.op == collective::reduce || c.op == collective::reducescatter)
    out.what += fmt::format("; {} sum", kCollElemName);
  out.from_pe = out.to_pe = -1;
  out.bytes = barrier ? 0 : c.bytes;
  out.ctas = r.ctas;
  out.threads = r.threads;
  out.ops = r.m.ops;
  out.t = r.m.t;
  if (!barrier) out.bandwidth_gbs = gbs(coll_size_bytes(c.op, c.bytes, ctx.n_pes), r.m.t.median_us);
  out.ceiling_gbs = ctx.opt.nvlink_ceiling_gbs;
  out.check = r.m.check;
  out.note = c.force ? fmt::format("forced {}; {}", to_string(*c.force), r.m.note) : r.m.note;
  return out;
}

namespace {
// An incumbent's figure beside a collective row. Its note joins the row's when it explains something: a
// failed check or a failure it reports, or why it gave no figure (NCCL skips its alltoall from 1 MiB).
peer_figure coll_peer_figure(const context& ctx, row& r, collective op, const measurement& m, const char* who) {
  const bool no_figure = std::isnan(m.t.median_us);
  if (m.check == check_result::failed || m.note.find("failed") != std::string::npos || (no_figure && !m.note.empty()))
    r.note += (r.note.empty() ? std::string(who) + ": " : std::string("; ") + who + ": ") + m.note;
  return {.time_us = m.t.median_us,
          .bandwidth_gbs = gbs(coll_size_bytes(op, r.bytes, ctx.n_pes), m.t.median_us),
          .check = m.check};
}
}  // namespace

void attach_nccl_coll(const context& ctx, row& r, collective op, const measurement& nccl) {
  r.nccl = coll_peer_figure(ctx, r, op, nccl, "NCCL");
}

void attach_nvshmem_coll(const context& ctx, row& r, collective op, const measurement& nvshmem) {
  r.nvshmem = coll_peer_figure(ctx, r, op, nvshmem, "NVSHMEM");
}

}  // namespace shoal::perf
