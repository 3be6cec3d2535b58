// Expert-parallel mixture-of-experts dispatch and combine, all inside one kernel. Each PE holds a batch of
// tokens and some of the experts; every token goes to its top-2 experts wherever they live, each expert
// transforms the tokens it received, and the results come back and are summed with the token's gate
// weights. Several rounds (layers) run back to back in one kernel, each with new tokens and a new routing,
// and a second launch goes on with more. Every PE checks its outputs against a host reference.
//
//   shoalrun -n 2 -- ./moe_dispatch_combine
//
// What it shows:
//   - packing by destination: each warp routes one (token, choice) pair and claims a row in the send
//     buffer of the expert's PE with a local atomicAdd, so each peer gets one contiguous message;
//   - an alltoall of the row counts inside the kernel (block scope, one CTA), so each receiver knows how
//     many rows it gets from each source. Within a node it is shoal::ll_only: the default form holds every
//     algorithm and takes 240 registers a thread, which would leave one CTA per SM;
//   - dispatch and combine as the same exchange in the two directions: one put_signal per peer (grid
//     scope within a node, one CTA per peer across nodes, where every message is a trip through the
//     proxy); the receiver waits on one counter for every piece of every peer;
//   - the combine needs no metadata coming back: a result returns to the row its token left from, and the
//     sender remembers which row that was.
// Rounds reuse every buffer without a barrier: a PE sends round r + 1's rows to a peer only after it has
// all of round r's results back, which that peer sent only after it had read round r's rows.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "shoal/device.cuh"
#include "shoal/shoal.hpp"

namespace {

constexpr int kTokens = 256;                // tokens per PE and round
constexpr int kHidden = 512;                // floats per token
constexpr int kTopK = 2;                    // experts per token, distinct
constexpr int kExpertsPerPe = 4;            // expert e lives on PE e / kExpertsPerPe
constexpr int kRounds = 4;                  // layers per launch, each with its own tokens and routing
constexpr int kLaunches = 2;                // the first one's time includes CUDA's one-time costs
constexpr int kCapacity = kTokens * kTopK;  // rows one PE can send another in a round (all of its choices)
constexpr int kCtas = 32;                   // every CTA must be resident (grid_sync); the same on every PE (signals)
constexpr int kThreads = 256;
constexpr int kWarps = kCtas * kThreads / 32;

// A token on its way to an expert, and on its way back with the expert's output in `x`.
struct alignas(16) token_row {
  int expert;
  int token;  // for a reader of the buffers; the combine finds rows by where they were sent
  int unused[2];
  float x[kHidden];
};

// ---- the model: reproducible on every PE and on the host --------------------------------------------------
__host__ __device__ std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__host__ __device__ std::uint64_t key(int pe, int round, int token, int item) {
  return mix(mix(mix(std::uint64_t(pe)) + std::uint64_t(round)) + std::uint64_t(token)) + std::uint64_t(item);
}
__host__ __device__ float unit(std::uint64_t bits) { return float(bits >> 40) * 0x1.0p-24f; }  // [0, 1)

__host__ __device__ float input(int pe, int round, int token, int i) {
  return 2.0f * unit(mix(key(pe, round, token, i))) - 1.0f;
}
// The k-th expert of a token: two distinct experts out of `n_experts` (at least 2).
__host__ __device__ int expert_of(int pe, int round, int token, int k, int n_experts) {
  const int first = int(mix(key(pe, round, token, -1)) % std::uint64_t(n_experts));
  if (k == 0) return first;
  return (first + 1 + int(mix(key(pe, round, token, -2)) % std::uint64_t(n_experts - 1))) % n_experts;
}
__host__ __device__ float gate(int pe, int round, int token, int k) {
  return 0.25f + 0.75f * unit(mix(key(pe, round, token, -3 - k)));
}
// Expert e's transform of one value (a stand-in for its MLP): distinct per expert, so a token sent to the
// wrong expert shows in the result.
__host__ __device__ float expert_scale(int e) { return 1.0f + 0.125f * float(e); }
__host__ __device__ float expert_bias(int e) { return -0.5f + 0.0625f * float(e); }

// ---- the kernel ---------------------------------------------------------------------------------------
// Symmetric objects, the same on every PE. Rows are indexed [peer][slot], kCapacity slots per peer.
struct buffers {
  token_row* send;             // [peer]: rows this PE sends the peer's experts, packed in slot order
  token_row* recv;             // [source]: rows from the source; the experts write their output over them
  token_row* back;             // [peer]: the outputs of the rows this PE sent the peer, in the same slots
  std::uint64_t* send_counts;  // [peer]: rows packed for the peer this round
  std::uint64_t* recv_counts;  // [source]: rows the source sends this PE this round (from the alltoall)
  std::uint64_t* dispatched;   // counts every piece of every round's rows that arrived in `recv`
  std::uint64_t* combined;     // the same for `back`
  int* sent_to;                // local, [token][k]: peer * kCapacity + slot of the (token, k) row
};

__device__ int warp_id() { return int((blockIdx.x * blockDim.x + threadIdx.x) / 32); }
__device__ int lane() { return int(threadIdx.x % 32); }

// The rows' floats in 16-byte vectors, kVectorsPerLane per lane of a warp: a fixed count, so the loops
// unroll and a lane's loads are in flight together, not one after another.
static_assert(kHidden % (4 * 32) == 0);
constexpr int kVectorsPerLane = kHidden / 4 / 32;
__device__ float4* vectors(float* x) { return reinterpret_cast<float4*>(x); }
__device__ float4 axpy(float a, float4 x, float4 y) {  // a * x + y
  return make_float4(a * x.x + y.x, a * x.y + y.y, a * x.z + y.z, a * x.w + y.w);
}

// Routes each (token, k) of this round to its expert's PE and packs the row into that PE's send block.
__device__ void route_and_pack(const shoal::device_handle& h, const buffers& b, int round) {
  const int me = shoal::my_pe(h), n_experts = kExpertsPerPe * shoal::n_pes(h);
  for (int item = warp_id(); item < kTokens * kTopK; item += kWarps) {
    const int token = item / kTopK, k = item % kTopK;
    const int expert = expert_of(me, round, token, k, n_experts), peer = expert / kExpertsPerPe;
    int slot = 0;
    if (lane() == 0) slot = int(atomicAdd(reinterpret_cast<unsigned long long*>(&b.send_counts[peer]), 1ull));
    slot = __shfl_sync(0xffffffffu, slot, 0);
    token_row& row = b.send[peer * kCapacity + slot];
    if (lane() == 0) row.expert = expert, row.token = token, b.sent_to[item] = peer * kCapacity + slot;
    for (int i = lane(); i < kHidden; i += 32) row.x[i] = input(me, round, token, i);
  }
}

// Sends `rows[peer]` (counts[peer] rows) to every peer's `to[me]`, adding 1 to `arrived` on the peer for
// each piece; returns how many pieces each peer sends this PE. Within a node the whole grid shares each
// message; across nodes CTA p % gridDim.x sends the message to peer p whole, one proxy request.
__device__ std::uint64_t exchange_rows(const shoal::device_handle& h, const token_row* rows, token_row* to,
                                       const std::uint64_t* counts, std::uint64_t* arrived, bool across_nodes) {
  const int me = shoal::my_pe(h), n = shoal::n_pes(h);
  for (int peer = 0; peer < n; ++peer) {
    const token_row* from = rows + peer * kCapacity;
    token_row* into = to + me * kCapacity;
    const std::size_t count = __ldcg(&counts[peer]);
    if (!across_nodes)
      shoal::put_signal(shoal::grid, h, into, from, count, arrived, 1, shoal::sig_op::add, peer);
    else if (int(blockIdx.x) == peer % int(gridDim.x))
      shoal::put_signal(shoal::block, h, into, from, count, arrived, 1, shoal::sig_op::add, peer);
  }
  return across_nodes ? 1 : gridDim.x;
}

// Runs each received row through its expert, in place.
__device__ void run_experts(const shoal::device_handle& h, const buffers& b) {
  for (int source = 0; source < shoal::n_pes(h); ++source) {
    const int rows = int(__ldcg(&b.recv_counts[source]));
    for (int r = warp_id(); r < rows; r += kWarps) {
      token_row& row = b.recv[source * kCapacity + r];
      const float scale = expert_scale(row.expert), bias = expert_bias(row.expert);
      float4* x = vectors(row.x);
#pragma unroll
      for (int j = 0; j < kVectorsPerLane; ++j) {
        const int i = lane() + 32 * j;
        x[i] = axpy(scale, x[i], make_float4(bias, bias, bias, bias));
      }
    }
  }
}

// out[token] = sum over k of gate(token, k) * (the k-th expert's output for the token), summed in k order.
__device__ void combine(const shoal::device_handle& h, const buffers& b, int round, float* out) {
  const int me = shoal::my_pe(h);
  for (int token = warp_id(); token < kTokens; token += kWarps) {
    float weight[kTopK];
    float4* output[kTopK];
    for (int k = 0; k < kTopK; ++k)
      weight[k] = gate(me, round, token, k), output[k] = vectors(b.back[b.sent_to[token * kTopK + k]].x);
    float4* sum = vectors(out + token * kHidden);
#pragma unroll
    for (int j = 0; j < kVectorsPerLane; ++j) {
      const int i = lane() + 32 * j;
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int k = 0; k < kTopK; ++k) acc = axpy(weight[k], output[k][i], acc);
      sum[i] = acc;
    }
  }
}

// One PE's part of kRounds MoE layers from `first_round` on; out holds [round][token][kHidden] floats.
// Two CTAs per SM at most, so that the grid is resident on a share of a GPU too.
template <bool AcrossNodes>
__global__ void __launch_bounds__(kThreads, 2)
    moe_layers(shoal::team_handle world, buffers b, float* out, int first_round) {
  const shoal::device_handle& h = world.world;
  const std::uint64_t n = std::uint64_t(shoal::n_pes(h));
  for (int round = first_round; round < first_round + kRounds; ++round) {
    if (blockIdx.x == 0 && threadIdx.x < n) b.send_counts[threadIdx.x] = 0;
    // Every CTA is done with the last round (its combine read sent_to, which the packing rewrites), and the
    // counts are zero.
    shoal::grid_sync(h);
    route_and_pack(h, b, round);
    shoal::grid_sync(h);  // the counts are final and every row is packed
    if (blockIdx.x == 0) {
      if constexpr (AcrossNodes)
        shoal::alltoall(shoal::block, world, b.recv_counts, b.send_counts, 1);
      else
        shoal::alltoall(shoal::block, world, b.recv_counts, b.send_counts, 1, shoal::ll_only);
    }
    shoal::grid_sync(h);  // every CTA reads recv_counts below

    // Dispatch: wait for every peer's rows of this round, all pieces of them.
    const std::uint64_t pieces = exchange_rows(h, b.send, b.recv, b.send_counts, b.dispatched, AcrossNodes);
    shoal::signal_wait_until(shoal::block, h, b.dispatched, shoal::cmp::ge, (round + 1) * n * pieces);
    run_experts(h, b);
    shoal::grid_sync(h);  // a CTA sends back rows that other CTAs computed

    // Combine: the outputs go back to the slots their rows left from.
    exchange_rows(h, b.recv, b.back, b.recv_counts, b.combined, AcrossNodes);
    shoal::signal_wait_until(shoal::block, h, b.combined, shoal::cmp::ge, (round + 1) * n * pieces);
    combine(h, b, round, out + std::size_t(round) * kTokens * kHidden);
  }
}

// ---- the host ------------------------------------------------------------------------------------------
// This PE's outputs of every round of every launch, in double precision.
std::vector<double> reference(int n_pes, int pe) {
  std::vector<double> out(std::size_t(kLaunches) * kRounds * kTokens * kHidden);
  for (int round = 0; round < kLaunches * kRounds; ++round)
    for (int token = 0; token < kTokens; ++token)
      for (int k = 0; k < kTopK; ++k) {
        const int e = expert_of(pe, round, token, k, kExpertsPerPe * n_pes);
        for (int i = 0; i < kHidden; ++i)
          out[(std::size_t(round) * kTokens + token) * kHidden + i] +=
              double(gate(pe, round, token, k)) *
              (double(input(pe, round, token, i)) * expert_scale(e) + double(expert_bias(e)));
      }
  return out;
}

bool cuda_ok(cudaError_t status, const char* what) {
  if (status != cudaSuccess) std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(status));
  return status == cudaSuccess;
}

int run() {
  shoal::world world = shoal::init();
  const int n = world.n_pes();
  const std::size_t rows = std::size_t(n) * kCapacity;
  int* sent_to = nullptr;
  float* out = nullptr;
  const std::size_t outputs = std::size_t(kLaunches) * kRounds * kTokens * kHidden;
  if (!cuda_ok(cudaMalloc(&sent_to, kTokens * kTopK * sizeof(int)), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&out, outputs * sizeof(float)), "cudaMalloc"))
    return 1;
  const buffers b{world.malloc_array<token_row>(rows),
                  world.malloc_array<token_row>(rows),
                  world.malloc_array<token_row>(rows),
                  world.malloc_array<std::uint64_t>(n),
                  world.malloc_array<std::uint64_t>(n),
                  static_cast<std::uint64_t*>(world.calloc(1, sizeof(std::uint64_t))),
                  static_cast<std::uint64_t*>(world.calloc(1, sizeof(std::uint64_t))),
                  sent_to};
  // grid_sync needs every CTA resident at once: say so rather than hang (and let shoalrun stop the others).
  const auto kernel = world.bootstrap().n_nodes() > 1 ? moe_layers<true> : moe_layers<false>;
  int device = 0, sms = 0, per_sm = 0;
  if (!cuda_ok(cudaGetDevice(&device), "cudaGetDevice") ||
      !cuda_ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute") ||
      !cuda_ok(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0), "occupancy"))
    return 1;
  if (per_sm * sms < kCtas) {
    std::fprintf(stderr, "PE %d: the kernel needs %d CTAs resident at once; this GPU holds %d\n", world.pe(), kCtas,
                 per_sm * sms);
    return 1;
  }
  barrier_all(world);  // every PE's signals are zeroed before any PE sends

  // The launches go back to back on the stream: the second goes on where the first stopped (the signals
  // count on), with no barrier in between. Events between them time each launch.
  const shoal::team_handle all = shoal::world_team(world).device_handle();
  cudaEvent_t events[kLaunches + 1];
  for (cudaEvent_t& e : events)
    if (!cuda_ok(cudaEventCreate(&e), "cudaEventCreate")) return 1;
  if (!cuda_ok(cudaEventRecord(events[0]), "cudaEventRecord")) return 1;
  for (int launch = 0; launch < kLaunches; ++launch) {
    kernel<<<kCtas, kThreads>>>(all, b, out, launch * kRounds);
    if (!cuda_ok(cudaGetLastError(), "kernel launch") ||
        !cuda_ok(cudaEventRecord(events[launch + 1]), "cudaEventRecord"))
      return 1;
  }
  float ms = 0;  // the last launch's
  std::vector<float> got(outputs);
  if (!cuda_ok(cudaEventSynchronize(events[kLaunches]), "the kernels") ||
      !cuda_ok(cudaEventElapsedTime(&ms, events[kLaunches - 1], events[kLaunches]), "timing") ||
      !cuda_ok(cudaMemcpy(got.data(), out, outputs * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy"))
    return 1;

  const std::vector<double> want = reference(n, world.pe());
  double worst = 0;  // float on the device, double on the host
  for (std::size_t i = 0; i < outputs; ++i) worst = std::fmax(worst, std::fabs(double(got[i]) - want[i]));
  const bool ok = worst < 1e-5;
  std::printf(
      "PE %d: %d rounds of %d tokens x top-%d of %d experts, %.1f us per round (the last %d): %s "
      "(largest error %.1e)\n",
      world.pe(), kLaunches * kRounds, kTokens, kTopK, kExpertsPerPe * n, 1e3 * ms / kRounds, kRounds,
      ok ? "ok" : "WRONG", worst);

  barrier_all(world);  // nobody frees while a peer may still write
  world.free(b.combined);
  world.free(b.dispatched);
  world.free(b.recv_counts);
  world.free(b.send_counts);
  world.free(b.back);
  world.free(b.recv);
  world.free(b.send);
  bool released = cuda_ok(cudaFree(out), "cudaFree") && cuda_ok(cudaFree(b.sent_to), "cudaFree");
  for (cudaEvent_t e : events) released = cuda_ok(cudaEventDestroy(e), "cudaEventDestroy") && released;
  return ok && released ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const shoal::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
