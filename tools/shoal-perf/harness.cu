// The harness's CUDA side: context setup, rotated arenas, batch timing with events, the launch floor and
// the seeded-pattern correctness check.
#include "harness.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

#include "shoal/bootstrap.hpp"
#include "shoal/dev/detail/spin.cuh"

namespace shoal::perf {

void cuda_failed(cudaError_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ") at " + file + ":" + std::to_string(line));
}

timing summarize(std::vector<double> v) {
  timing t;
  if (v.empty()) return t;
  std::sort(v.begin(), v.end());
  // Linear interpolation between closest ranks.
  auto quantile = [&](double q) {
    double pos = q * static_cast<double>(v.size() - 1);
    auto lo = static_cast<std::size_t>(pos);
    std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  t.median_us = quantile(0.5);
  t.p10_us = quantile(0.1);
  t.p90_us = quantile(0.9);
  return t;
}

std::string utc_now_iso() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text.data();
}

namespace {

constexpr int kResultWords = 64;
constexpr int kResultCheck = 63;  // the check's mismatch count; the suites use the low indices
constexpr std::uint64_t kMiB = 1ull << 20;



__global__ void empty_kernel() {}

// Holds its stream until the host writes *release (mapped pinned memory), or gives up after timeout_ns and
// says so in *gave_up, so a stuck host never hangs the run.
__global__ void hold_stream_kernel(const volatile int* release, std::uint64_t timeout_ns, volatile int* gave_up) {
  const std::uint64_t start = shoal::detail::global_timer_ns();
  while (*release == 0) {
    if (shoal::detail::global_timer_ns() - start > timeout_ns) {
      *gave_up = 1;
      return;
    }
  }
}

// The seeded pattern: byte i of a buffer is byte (i % 8) of mix(seed + i / 8). Different seeds differ
// everywhere (with overwhelming probability), so a stale or misplaced byte cannot pass.
__device__ inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ inline unsigned char pattern_byte(std::uint64_t seed, std::uint64_t i) {
  return static_cast<unsigned char>(mix(seed + (i >> 3)) >> ((i & 7) * 8));
}

constexpr unsigned char kPoison = 0xA5;

__global__ void fill_pattern_kernel(std::byte* p, std::uint64_t bytes, std::uint64_t seed) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes; i += stride)
    p[i] = std::byte{pattern_byte(seed, i)};
}

// Counts bytes of [p, p + bytes) that differ from the pattern, and guard bytes after them that lost the
// poison; one atomic per thread.
__global__ void count_mismatches_kernel(const std::byte* p, std::uint64_t bytes, std::uint64_t guard,
                                        std::uint64_t seed, unsigned long long* errors) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes + guard; i += stride) {
    unsigned char want = i < bytes ? pattern_byte(seed, i) : kPoison;
    bad += static_cast<unsigned char>(p[i]) != want;
  }
  if (bad != 0) atomicAdd(errors, bad);
}

unsigned grid_for(std::uint64_t bytes, int sm_count) {
  std::uint64_t blocks = (bytes + 255) / 256;
  return static_cast<unsigned>(std::clamp<std::uint64_t>(blocks, 1, std::uint64_t(sm_count) * 8));
}

}  // namespace

// ---- context -------------------------------------------------------------------------------------------

context::context(shoal::world& w, options o) : world(w), opt(std::move(o)), pe(w.pe()), n_pes(w.n_pes()) {
  SHOAL_PERF_CUDA(cudaSetDevice(w.device()));
  SHOAL_PERF_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaDeviceProp prop{};
  SHOAL_PERF_CUDA(cudaGetDeviceProperties(&prop, w.device()));
  machine.gpu_name = prop.name;
  machine.sm_count = prop.multiProcessorCount;
  machine.l2_bytes = static_cast<std::uint64_t>(prop.l2CacheSize);

  // Which GPU each PE drives: its name for the label, its UUID to tell PEs sharing one GPU apart.
  struct gpu_of_pe {
    std::array<char, 112> name{};
    std::array<char, 16> uuid{};
  } mine;
  std::memcpy(mine.name.data(), prop.name, std::min(std::strlen(prop.name), mine.name.size() - 1));
  std::memcpy(mine.uuid.data(), prop.uuid.bytes, mine.uuid.size());
  std::vector<gpu_of_pe> all(static_cast<std::size_t>(n_pes));
  w.bootstrap().all_gather(&mine, all.data(), sizeof mine);
  std::set<std::array<char, 16>> uuids;
  bool same = true;
  for (const gpu_of_pe& g : all) {
    uuids.insert(g.uuid);
    same = same && std::strcmp(g.name.data(), mine.name.data()) == 0;
  }
  machine.gpus = static_cast<int>(uuids.size());
  // "NAME xN" when every PE has the same kind of GPU, else each PE's name in order; "(P PEs)" when they share.
  if (same) {
    machine.label = machine.gpu_name + " x" + std::to_string(machine.gpus);
  } else {
    for (int p = 0; p < n_pes; ++p) machine.label += (p ? " + " : "") + std::string(all[std::size_t(p)].name.data());
  }
  if (machine.gpus < n_pes) machine.label += " (" + std::to_string(n_pes) + " PEs)";

  words_ = static_cast<std::uint64_t*>(w.calloc(static_cast<std::size_t>(kWordBarrierCheck + n_pes), sizeof(std::uint64_t)));
  SHOAL_PERF_CUDA(cudaMalloc(&results_, kResultWords * sizeof(std::uint64_t)));
  SHOAL_PERF_CUDA(cudaMemset(results_, 0, kResultWords * sizeof(std::uint64_t)));
}

// Not collective: it runs on error paths too, where another PE may be gone. The symmetric objects go with
// the world's heap.
context::~context() {
  if (results_ != nullptr) cudaFree(results_);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

std::uint64_t context::slot_stride(std::uint64_t bytes) { return round_up(std::max<std::uint64_t>(bytes, 1), 256); }

std::uint32_t context::n_slots(std::uint64_t bytes) const {
  if (!opt.rotate) return 1;
  std::uint64_t n = arena_bytes_ / slot_stride(bytes);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(n, 1, 1u << 30));
}

std::uint64_t context::arena_bytes_for(std::uint64_t max_message) const {
  const std::uint64_t need = std::max(round_up(max_message, 256) + 4096, 2 * machine.l2_bytes + 64 * kMiB);
  return round_up(need, 2 * kMiB);
}

void context::reserve(std::uint64_t max_message) {
  const std::uint64_t need = arena_bytes_for(max_message);
  if (need <= arena_bytes_) return;
  sync_stream();
  if (src_ != nullptr) world.free(src_);
  if (dst_ != nullptr) world.free(dst_);
  src_ = dst_ = nullptr;
  arena_bytes_ = 0;
  src_ = static_cast<std::byte*>(world.malloc(need));
  dst_ = static_cast<std::byte*>(world.malloc(need));
  arena_bytes_ = need;
}

std::uint64_t context::read_result(int index) {
  std::uint64_t value = 0;
  SHOAL_PERF_CUDA(cudaMemcpyAsync(&value, results_ + index, sizeof value, cudaMemcpyDeviceToHost, stream));
  SHOAL_PERF_CUDA(cudaStreamSynchronize(stream));
  return value;
}

std::uint64_t context::next_sequence(std::uint64_t count) {
  std::uint64_t first = sequence_;
  sequence_ += count;
  return first;
}

void context::sync_stream() { SHOAL_PERF_CUDA(cudaStreamSynchronize(stream)); }

void context::barrier() {
  sync_stream();
  world.bootstrap().barrier();
}

std::uint64_t context::broadcast(std::uint64_t value, int root) {
  world.bootstrap().broadcast(&value, sizeof value, root);
  return value;
}

double context::broadcast(double value, int root) {
  world.bootstrap().broadcast(&value, sizeof value, root);
  return value;
}

std::vector<double> context::max_over_pes(const std::vector<double>& values) {
  std::vector<double> all(values.size() * static_cast<std::size_t>(n_pes));
  if (values.empty()) return {};
  world.bootstrap().all_gather(values.data(), all.data(), values.size() * sizeof(double));
  std::vector<double> out = values;
  for (int p = 0; p < n_pes; ++p)
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = std::max(out[i], all[p * values.size() + i]);
  return out;
}

std::uint64_t context::sum_over_pes(std::uint64_t value) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(n_pes));
  world.bootstrap().all_gather(&value, all.data(), sizeof value);
  std::uint64_t sum = 0;
  for (std::uint64_t v : all) sum += v;
  return sum;
}

std::int64_t context::ops_per_batch(std::uint64_t bytes) const {
  if (opt.iters > 0) return opt.iters;
  std::uint64_t n = (256 * kMiB) / std::max<std::uint64_t>(bytes, 1);
  return static_cast<std::int64_t>(std::clamp<std::uint64_t>(n, 4, 10000));
}

// ---- timing --------------------------------------------------------------------------------------------

namespace {
constexpr double kTargetKernelNs = 20e6;  // a timed kernel runs about this long when --iters is not given
constexpr std::uint32_t kMinKernelIters = 64, kMaxKernelIters = 20000;
}  // namespace

measurement time_in_kernel(context& ctx, const std::function<double(std::uint32_t, std::uint32_t)>& run) {
  std::uint32_t iters = static_cast<std::uint32_t>(ctx.opt.iters);
  if (iters == 0) {
    const double ns_per_iter = run(kInKernelWarmup, kMinKernelIters) / kMinKernelIters;
    const double n = ns_per_iter > 0 ? kTargetKernelNs / ns_per_iter : kMaxKernelIters;
    iters = static_cast<std::uint32_t>(std::clamp<double>(std::floor(n), kMinKernelIters, kMaxKernelIters));
  }
  std::vector<double> us;
  for (int r = 0; r < ctx.opt.warmup + ctx.opt.reps; ++r) {
    const double ns = run(kInKernelWarmup, iters);
    if (r >= ctx.opt.warmup) us.push_back(ns / 1e3 / iters);
  }
  measurement m;
  m.ops = iters;
  m.t = summarize(us);
  return m;
}

std::vector<double> time_batches(context& ctx, const std::function<void(int)>& enqueue,
                                 const std::function<void()>& before_start) {
  cuda_event start, stop;
  std::vector<double> ms;
  const int total = ctx.opt.warmup + ctx.opt.reps;
  for (int batch = 0; batch < total; ++batch) {
    ctx.barrier();
    if (before_start) before_start();
    SHOAL_PERF_CUDA(cudaEventRecord(start.e, ctx.stream));
    enqueue(batch);
    SHOAL_PERF_CUDA(cudaGetLastError());
    SHOAL_PERF_CUDA(cudaEventRecord(stop.e, ctx.stream));
    SHOAL_PERF_CUDA(cudaEventSynchronize(stop.e));
    float elapsed = 0;
    SHOAL_PERF_CUDA(cudaEventElapsedTime(&elapsed, start.e, stop.e));
    if (batch >= ctx.opt.warmup) ms.push_back(elapsed);
  }
  ctx.barrier();
  return ms;
}

queued_timing time_queued_calls(context& ctx, int calls, const std::function<void()>& prologue,
                                const std::function<void()>& enqueue_one) {
  int* pinned = nullptr;  // [0]: release, [1]: gave up
  SHOAL_PERF_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 2 * sizeof(int), cudaHostAllocMapped));
  const std::unique_ptr<int, void (*)(int*)> gate(pinned, [](int* p) { cudaFreeHost(p); });
  int* gate_dev = nullptr;
  SHOAL_PERF_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&gate_dev), gate.get(), 0));
  auto* release = reinterpret_cast<volatile int*>(gate.get());
  cuda_event start, stop;
  std::vector<double> gpu_ms, host_ms;
  bool gave_up = false;
  const int total = ctx.opt.warmup + ctx.opt.reps;
  for (int batch = 0; batch < total; ++batch) {
    release[0] = 0;
    release[1] = 0;
    ctx.barrier();
    hold_stream_kernel<<<1, 1, 0, ctx.stream>>>(gate_dev, 1'000'000'000ull, gate_dev + 1);
    SHOAL_PERF_CUDA(cudaGetLastError());
    const auto host_start = std::chrono::steady_clock::now();
    prologue();
    SHOAL_PERF_CUDA(cudaEventRecord(start.e, ctx.stream));
    for (int i = 0; i < calls; ++i) enqueue_one();
    SHOAL_PERF_CUDA(cudaGetLastError());
    SHOAL_PERF_CUDA(cudaEventRecord(stop.e, ctx.stream));
    const std::chrono::duration<double, std::milli> host = std::chrono::steady_clock::now() - host_start;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    release[0] = 1;
    SHOAL_PERF_CUDA(cudaEventSynchronize(stop.e));
    gave_up |= release[1] != 0;
    float elapsed = 0;
    SHOAL_PERF_CUDA(cudaEventElapsedTime(&elapsed, start.e, stop.e));
    if (batch >= ctx.opt.warmup) {
      gpu_ms.push_back(elapsed);
      host_ms.push_back(host.count());
    }
  }
  ctx.barrier();
  queued_timing q;
  q.ok = ctx.sum_over_pes(gave_up ? 1 : 0) == 0;
  if (!q.ok) return q;
  q.gpu_us = summarize(ctx.max_over_pes(gpu_ms)).median_us * 1e3 / calls;
  q.host_us = summarize(ctx.max_over_pes(host_ms)).median_us * 1e3 / calls;
  return q;
}

std::string describe(const queued_timing& q) {
  if (!q.ok) return "queued ahead: not measured (the host took over a second to enqueue a batch)";
  char text[128];
  std::snprintf(text, sizeof text, "queued ahead: GPU %.2f us, host enqueue %.2f us per call", q.gpu_us, q.host_us);
  return text;
}

queued_timing measure_launch_floor_queued(context& ctx, int launches) {
  return time_queued_calls(ctx, launches, [] {}, [&] { empty_kernel<<<1, 1, 0, ctx.stream>>>(); });
}

double measure_launch_floor(context& ctx, int launches) {
  std::vector<double> ms = time_batches(ctx, [&](int) {
    for (int i = 0; i < launches; ++i) empty_kernel<<<1, 1, 0, ctx.stream>>>();
    SHOAL_PERF_CUDA(cudaGetLastError());
  });
  for (double& v : ms) v = v * 1e3 / launches;
  return summarize(ms).median_us;
}

// ---- correctness ---------------------------------------------------------------------------------------

check_result check_transfers(context& ctx, std::span<const transfer> transfers, const std::function<void()>& op) {
  const std::uint64_t seed = ctx.next_seed() << 16;
  const int sms = ctx.machine.sm_count;
  for (std::size_t i = 0; i < transfers.size(); ++i) {
    const transfer& t = transfers[i];
    if (ctx.pe == t.source_pe) {
      fill_pattern_kernel<<<grid_for(t.bytes, sms), 256, 0, ctx.stream>>>(const_cast<std::byte*>(t.src), t.bytes, seed + i);
      SHOAL_PERF_CUDA(cudaGetLastError());
    }
    if (ctx.pe == t.target_pe)
      SHOAL_PERF_CUDA(cudaMemsetAsync(t.dst, kPoison, t.bytes + kGuardBytes, ctx.stream));
  }
  ctx.barrier();
  op();
  ctx.barrier();
  std::uint64_t errors = 0;
  for (std::size_t i = 0; i < transfers.size(); ++i) {
    const transfer& t = transfers[i];
    if (ctx.pe != t.target_pe) continue;
    auto* counter = reinterpret_cast<unsigned long long*>(ctx.results() + kResultCheck);
    SHOAL_PERF_CUDA(cudaMemsetAsync(counter, 0, sizeof *counter, ctx.stream));
    count_mismatches_kernel<<<grid_for(t.bytes + kGuardBytes, sms), 256, 0, ctx.stream>>>(t.dst, t.bytes, kGuardBytes,
                                                                                         seed + i, counter);
    SHOAL_PERF_CUDA(cudaGetLastError());
    errors += ctx.read_result(kResultCheck);
  }
  return ctx.sum_over_pes(errors) == 0 ? check_result::ok : check_result::failed;
}

}  // namespace shoal::perf
