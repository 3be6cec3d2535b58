// Halo exchange fused with the computation it feeds: 2-D heat diffusion (a 5-point Jacobi stencil) on a
// periodic grid cut into strips of rows, one strip per PE, all steps in one kernel. Each step sends the
// strip's first and last rows to the PEs above and below, waits for their rows, then updates the strip.
// Every PE checks its strip against a host reference of the whole grid.
//
//   shoalrun -n 2 -- ./halo_exchange
//
// What it shows:
//   - grid-scope put_signal: every CTA sends its share of a row and adds 1 to the receiver's signal, so a
//     receiver waits for (steps so far) x (CTAs) updates; each CTA waits with the block form. Across nodes
//     one CTA sends whole rows instead, since there every message costs a trip through the proxy;
//   - two halo slots, by the step's parity: a neighbour can run at most one step ahead (it needs this PE's
//     rows of the step in between), so it never overwrites a slot this PE is still reading;
//   - grid_sync between steps, since a CTA's next rows to send were computed by other CTAs.
// With one PE the strip is its own neighbour above and below, and the same code runs.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "shoal/device.cuh"
#include "shoal/shoal.hpp"

namespace {

constexpr int kRows = 128;   // rows per PE
constexpr int kCols = 2048;  // 16 KiB rows of doubles: each halo message
constexpr int kSteps = 200;  // even: the last step writes the buffer that started as `cur`
constexpr int kCtas = 32;    // every CTA must be resident (grid_sync); the same on every PE (signal counts)
constexpr int kThreads = 256;
constexpr double kDiffusion = 0.2;  // stable below 0.25

// The starting temperature of global cell (row, col): reproducible on every PE, not smooth.
__host__ __device__ double initial(int row, int col) {
  std::uint64_t x = std::uint64_t(row) * 0x9E3779B97F4A7C15ull + std::uint64_t(col) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return double(x >> 11) * 0x1.0p-53;  // [0, 1)
}

__host__ __device__ double stencil(double centre, double up, double down, double left, double right) {
  return centre + kDiffusion * (up + down + left + right - 4.0 * centre);
}

// Symmetric objects, the same on every PE. halo[slot][side] holds the row that came from the PE above
// (side 0) or below (side 1); arrived[side] counts the CTA updates of every step so far.
struct halos {
  double* rows;            // [2 slots][2 sides][kCols]
  std::uint64_t* arrived;  // [2 sides]
  __device__ double* row(int slot, int side) const { return rows + (std::size_t(slot) * 2 + side) * kCols; }
};

// One step of this grid's share of the strip's cells. The strips do not overlap (__restrict__), so the
// compiler may load a thread's next cells before storing this one: each thread has several in flight.
__device__ void update_strip(const double* __restrict__ cur, double* __restrict__ next, const double* from_above,
                             const double* from_below) {
  for (int cell = blockIdx.x * blockDim.x + threadIdx.x; cell < kRows * kCols; cell += gridDim.x * blockDim.x) {
    const int r = cell / kCols, c = cell % kCols;
    const double* row = cur + std::size_t(r) * kCols;
    const double up = r == 0 ? from_above[c] : row[c - kCols];
    const double down = r == kRows - 1 ? from_below[c] : row[c + kCols];
    next[cell] = stencil(row[c], up, down, row[(c + kCols - 1) % kCols], row[(c + 1) % kCols]);
  }
}

// Sends this PE's first row to the PE above (its halo from below) and its last row to the PE below (its
// halo from above), each with put_signal at `scope`: the whole grid, or one CTA.
template <typename Scope>
__device__ void send_halos(Scope scope, const shoal::device_handle& h, const halos& halo, int slot, const double* cur) {
  const int above = (shoal::my_pe(h) + shoal::n_pes(h) - 1) % shoal::n_pes(h);
  const int below = (shoal::my_pe(h) + 1) % shoal::n_pes(h);
  shoal::put_signal(scope, h, halo.row(slot, 1), cur, kCols, &halo.arrived[1], 1, shoal::sig_op::add, above);
  shoal::put_signal(scope, h, halo.row(slot, 0), cur + std::size_t(kRows - 1) * kCols, kCols, &halo.arrived[0], 1,
                    shoal::sig_op::add, below);
}

// `cur` and `next` hold this PE's kRows x kCols strip (row-major). On return `cur` holds the last step.
// Within a node every CTA sends its share of each row (loads and stores over NVLink, spread over SMs). Across
// nodes each message is a request to the proxy thread, which costs tens of microseconds whatever its size:
// there CTA 0 sends each row whole, two messages per step instead of two per CTA.
__global__ void diffuse(shoal::device_handle h, halos halo, double* cur, double* next, bool across_nodes) {
  for (int step = 0; step < kSteps; ++step) {
    const int slot = step & 1;
    if (!across_nodes)
      send_halos(shoal::grid, h, halo, slot, cur);
    else if (blockIdx.x == 0)
      send_halos(shoal::block, h, halo, slot, cur);
    const std::uint64_t expected = std::uint64_t(step + 1) * (across_nodes ? 1 : gridDim.x);
    shoal::signal_wait_until(shoal::block, h, &halo.arrived[0], shoal::cmp::ge, expected);
    shoal::signal_wait_until(shoal::block, h, &halo.arrived[1], shoal::cmp::ge, expected);
    update_strip(cur, next, halo.row(slot, 0), halo.row(slot, 1));
    // Every CTA's part of `next` is written before any CTA sends its rows or reads its cells.
    shoal::grid_sync(h);
    double* done = next;
    next = cur;
    cur = done;
  }
}

// The whole grid of n_pes x kRows rows, stepped on the host; returns the rows of PE `pe`.
std::vector<double> reference_strip(int n_pes, int pe) {
  const int rows = n_pes * kRows;
  std::vector<double> cur(std::size_t(rows) * kCols), next(cur.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < kCols; ++c) cur[std::size_t(r) * kCols + c] = initial(r, c);
  auto at = [&](int r, int c) { return cur[std::size_t((r + rows) % rows) * kCols + (c + kCols) % kCols]; };
  for (int step = 0; step < kSteps; ++step) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < kCols; ++c)
        next[std::size_t(r) * kCols + c] = stencil(at(r, c), at(r - 1, c), at(r + 1, c), at(r, c - 1), at(r, c + 1));
    cur.swap(next);
  }
  return {cur.begin() + std::ptrdiff_t(pe) * kRows * kCols, cur.begin() + std::ptrdiff_t(pe + 1) * kRows * kCols};
}

bool cuda_ok(cudaError_t status, const char* what) {
  if (status != cudaSuccess) std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(status));
  return status == cudaSuccess;
}

int run() {
  shoal::world world = shoal::init();
  const std::size_t cells = std::size_t(kRows) * kCols;
  // The strips live in the symmetric heap too: across nodes the proxy sends from them.
  double* cur = world.malloc_array<double>(cells);
  double* next = world.malloc_array<double>(cells);
  const halos halo{world.malloc_array<double>(4 * kCols),
                   static_cast<std::uint64_t*>(world.calloc(2, sizeof(std::uint64_t)))};

  std::vector<double> strip(cells);
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) strip[std::size_t(r) * kCols + c] = initial(world.pe() * kRows + r, c);
  if (!cuda_ok(cudaMemcpy(cur, strip.data(), cells * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy")) return 1;
  barrier_all(world);  // every PE's signals are zeroed before any PE sends

  cudaEvent_t start, stop;
  if (!cuda_ok(cudaEventCreate(&start), "cudaEventCreate") || !cuda_ok(cudaEventCreate(&stop), "cudaEventCreate") ||
      !cuda_ok(cudaEventRecord(start), "cudaEventRecord"))
    return 1;
  diffuse<<<kCtas, kThreads>>>(world.device_handle(), halo, cur, next, world.bootstrap().n_nodes() > 1);
  float ms = 0;
  if (!cuda_ok(cudaGetLastError(), "kernel launch") || !cuda_ok(cudaEventRecord(stop), "cudaEventRecord") ||
      !cuda_ok(cudaEventSynchronize(stop), "the kernel") || !cuda_ok(cudaEventElapsedTime(&ms, start, stop), "timing"))
    return 1;

  static_assert(kSteps % 2 == 0, "the result is read from the buffer that started as cur");
  if (!cuda_ok(cudaMemcpy(strip.data(), cur, cells * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy")) return 1;
  const std::vector<double> want = reference_strip(world.n_pes(), world.pe());
  double worst = 0;  // the device may fuse multiply-adds where the host does not: compare with a tolerance
  for (std::size_t i = 0; i < cells; ++i) worst = std::fmax(worst, std::fabs(strip[i] - want[i]));
  const bool ok = worst < 1e-12;
  std::printf(
      "PE %d: %d steps of a %d x %d strip, halos from PEs %d and %d, %.1f us per step: %s (largest error %.1e)\n",
      world.pe(), kSteps, kRows, kCols, (world.pe() + world.n_pes() - 1) % world.n_pes(),
      (world.pe() + 1) % world.n_pes(), 1e3 * ms / kSteps, ok ? "ok" : "WRONG", worst);

  barrier_all(world);  // nobody frees while a peer may still write
  world.free(halo.arrived);
  world.free(halo.rows);
  world.free(next);
  world.free(cur);
  const bool destroyed =
      cuda_ok(cudaEventDestroy(start), "cudaEventDestroy") && cuda_ok(cudaEventDestroy(stop), "cudaEventDestroy");
  return ok && destroyed ? 0 : 1;
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
