#include "coll/stream_common.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "host/cuda_check.hpp"
#include "host/driver_api.hpp"
#include "host/world_impl.hpp"
#include "shoal/dev/coll/detail/range.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {

using shoal::errc;
using shoal::error;

team_handle stream_view(const team& t, channel_range channels, const char* call) {
  if (!t.valid()) throw error(errc::invalid_argument, call, "the team was destroyed or never created");
  if (!t.member())
    throw error(errc::invalid_argument, call,
                fmt::format("PE {} is not a member of this team", t.internals().boot->pe()));
  if (!t.reachable())
    throw error(errc::unsupported, call,
                "a member of this team is on another node and this job has no proxy transport (shoal was built "
                "without UCX)");
  team_handle h = t.device_handle();
  // Compared as count <= channel_count - first, which cannot overflow: as first + count, a count near INT_MAX
  // wrapped, passed, and the kernel's CTAs took channels past the team's state (team_handle::channels).
  const bool first_ok = channels.first >= 0 && channels.first <= h.channel_count;
  const int count = first_ok && channels.count == 0 ? h.channel_count - channels.first : channels.count;
  if (!first_ok || count < 1 || count > h.channel_count - channels.first)
    throw error(errc::invalid_argument, call,
                fmt::format("channels [{}, +{}) are not inside the team's {} channels", channels.first, count,
                            h.channel_count));
  return h.channels(channels.first, count);
}

void check_buffer(const team& t, const void* p, std::size_t bytes, const char* call, const char* what) {
  if (p == nullptr && bytes == 0) return;  // a call of count 0 enqueues nothing, and may pass null buffers
  try {
    t.internals().check_symmetric(p, bytes, call);
  } catch (const error& e) {
    throw error(errc::invalid_argument, call, fmt::format("{}: {}", what, e.what()));
  }
}

std::size_t collective_bytes(std::size_t count, std::size_t size, const char* call) {
  if (size != 0 && count > SIZE_MAX / size)
    throw error(errc::invalid_argument, call,
                fmt::format("a count of {} x {} bytes overflows the size of a buffer", count, size));
  return count * size;
}

void check_root(const team& t, int root, const char* call) {
  if (root < 0 || root >= t.size())
    throw error(errc::invalid_argument, call,
                fmt::format("root {} is not a member index of a team of {} PEs", root, t.size()));
}

void check_op_for_floating(reduce_op op, const char* call) {
  if (is_bit_op(op))
    throw error(errc::invalid_argument, call,
                fmt::format("operator {} is defined on integer types only", to_string(op)));
}

void check_reduce_op(reduce_op op, const char* call) {
  const auto value = static_cast<std::underlying_type_t<reduce_op>>(op);
  if (value < 0 || value >= kReduceOpCount)
    throw error(errc::invalid_argument, call,
                fmt::format("operator {} is not a shoal::reduce_op (0..{}: sum, prod, min, max, bit_and, bit_or, "
                            "bit_xor)",
                            value, kReduceOpCount - 1));
}

std::size_t team_bytes(std::size_t block_bytes, int members, const char* call) {
  const auto n = static_cast<std::size_t>(members);
  if (n != 0 && block_bytes > SIZE_MAX / n)
    throw error(errc::invalid_argument, call,
                fmt::format("{} members x {} bytes each overflows the size of a buffer", members, block_bytes));
  return block_bytes * n;
}

void check_no_overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes, const char* call) {
  auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  if (a_bytes != 0 && b_bytes != 0 && x < y + b_bytes && y < x + a_bytes)
    throw error(errc::invalid_argument, call, "dst and src overlap");
}

namespace {
// The largest share of `block_bytes` a launch of `ctas` CTAs gives one CTA: units split the block in 16-byte
// groups as the device does, and the first CTA's share is the largest.
std::uint64_t largest_share(std::uint64_t block_bytes, unsigned ctas) {
  return split_range(block_bytes, 16, 0, int(ctas)).size();
}
}  // namespace

coll_launch plan_launch(const team_handle& t, algorithm algo, std::uint64_t block_bytes, std::uint64_t total_bytes) {
  // Per-CTA shares of a few KiB, so that calls spread over many SMs: one SM writes at most ~50 GB/s
  // (perf notes 32) and a step's latency is paid once per CTA in parallel, so even a 4 KiB LL call,
  // whose lines are 8 KiB, is faster from 4 CTAs than from 1. Each CTA still moves whole 16-byte words.
  std::uint64_t share = kStreamShare, bytes = total_bytes;
  if (algo == algorithm::ll) share = std::min<std::uint64_t>(t.ll_bytes / 2, kLLShare), bytes = block_bytes;
  if (algo == algorithm::one_shot) share = std::min<std::uint64_t>(t.staged_bytes, kStagedShare), bytes = block_bytes;
  if (t.spans_nodes != 0) share = std::max(share, kProxiedShare);
  const std::uint64_t wanted = std::max<std::uint64_t>(1, (bytes + share - 1) / share);
  // Every CTA must be resident at once (CTA k of each member waits for its partners), so at most one per
  // SM of the smallest GPU in the job: a 512-thread collective CTA may use a whole SM's registers.
  const std::uint64_t cap = std::min<std::uint64_t>(std::uint64_t(t.channel_count), std::uint64_t(t.resident_ctas));
  const unsigned ctas = unsigned(std::min<std::uint64_t>(wanted, cap));
  if (algo != algorithm::ll && algo != algorithm::one_shot) return {ctas, kCollThreads};
  // An LL step gives each thread one 8-byte word of the CTA's share, a staged step one 16-byte vector:
  // threads beyond them would only meet at every CTA barrier and run the set-up. Whole warps, at most
  // kCollThreads (then each thread takes several per step). Narrowed this way, graph-replayed LL calls took
  // 2–18% less (perf notes 57), staged calls of 4–16 CTAs 5–10% on one GPU (perf notes 66).
  const std::uint64_t unit_bytes = algo == algorithm::ll ? 8 : 16;
  const std::uint64_t units = (largest_share(block_bytes, ctas) + unit_bytes - 1) / unit_bytes;
  return {ctas, unsigned(std::clamp<std::uint64_t>((units + 31) / 32 * 32, 32, kCollThreads))};
}

bool exchanges_with_copy_engines(const team& t, algorithm algo, std::uint64_t bytes) {
  return algo == algorithm::direct && t.copy_engine_bytes() != 0 && bytes >= t.copy_engine_bytes();
}

bool runs_ll_kernel(const team_handle& t, collective coll, algorithm algo, std::uint64_t block_bytes,
                    coll_launch launch) {
  if (algo != algorithm::ll) return false;
  return t.keeps_algorithm(coll, algo, largest_share(block_bytes, launch.ctas));
}

void check_launch(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // a failed launch also leaves the error as the last one: clear it
    throw error(errc::cuda, call, fmt::format("kernel launch failed: {}", cudaGetErrorString(status)));
  }
}

bool overlap_launches(const team& t) { return t.internals().cfg.coll_pdl; }

namespace {

// The driver's handle of `kernel` on the current device. The runtime looks it up (and loads the kernel's
// module if it is not yet); each host thread keeps what it found, for the few dozen kernels shoal launches.
CUfunction function_of(const void* kernel, const char* call) {
  struct known_function {
    const void* kernel;
    int device;
    CUfunction function;
  };
  thread_local std::vector<known_function> known;
  int device = 0;
  check_launch(cudaGetDevice(&device), call);
  for (const known_function& k : known)
    if (k.kernel == kernel && k.device == device) return k.function;
  cudaFunction_t function = nullptr;
  check_launch(cudaGetFuncBySymbol(&function, kernel), call);
  known.push_back({kernel, device, reinterpret_cast<CUfunction>(function)});
  return known.back().function;
}

}  // namespace

void launch_kernel(const void* kernel, coll_launch launch, bool overlap, cudaStream_t stream, void** params,
                   const char* call) {
  CUlaunchConfig config{};
  config.gridDimX = launch.ctas;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = launch.threads;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = reinterpret_cast<CUstream>(stream);
  CUlaunchAttribute programmatic[1]{};
  programmatic[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  programmatic[0].value.programmaticStreamSerializationAllowed = 1;
  config.attrs = programmatic;
  config.numAttrs = overlap ? 1 : 0;
  const CUresult status = driver().launch_kernel_ex(&config, function_of(kernel, call), params, nullptr);
  if (status != CUDA_SUCCESS) throw_cu_error(status, call, __FILE__, __LINE__);
}

}  // namespace shoal::detail
