// put / get (blocking and _nbi) at every scope, for sizes from 0 to over a MiB and for source and
// destination offsets that defeat 16-byte vector accesses, checked byte for byte against a host
// reference, including guard bytes around the target region; streams of small messages by one block or
// grid with one quiet at the end. Also p / g on several types.
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "gpu_env.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

enum class rma_op { put, put_nbi, get, get_nbi };
const char* name(rma_op op) {
  switch (op) {
    case rma_op::put:
      return "put";
    case rma_op::put_nbi:
      return "put_nbi";
    case rma_op::get:
      return "get";
    case rma_op::get_nbi:
      return "get_nbi";
  }
  return "?";
}

// put: symmetric `remote_side` on `pe` <- local `local_side`. get: local `local_side` <- `remote_side` on pe.
template <typename Scope>
__global__ void rma_kernel(device_handle h, rma_op op, std::byte* remote_side, std::byte* local_side, std::size_t n,
                           int pe) {
  Scope scope;
  switch (op) {
    case rma_op::put:
      put_bytes(scope, h, remote_side, local_side, n, pe);
      break;
    case rma_op::put_nbi:
      put_bytes_nbi(scope, h, remote_side, local_side, n, pe);
      quiet(scope, h);
      break;
    case rma_op::get:
      get_bytes(scope, h, local_side, remote_side, n, pe);
      break;
    case rma_op::get_nbi:
      get_bytes_nbi(scope, h, local_side, remote_side, n, pe);
      quiet(scope, h);
      break;
  }
}

struct launch_shape {
  unsigned blocks, threads;
};

template <typename Scope>
void run_matrix(launch_shape shape, std::size_t max_bytes) {
  shoal::world& w = *the_world();
  const std::size_t kGuard = 64;
  // 8 and 13 leave 16-byte-aligned copies with edges of one 8-byte piece, and of 8 + 4 + 1 bytes.
  const std::size_t sizes[] = {0, 1, 7, 8, 13, 16, 4096 + 3, 65536 + 9, (1u << 20) + 5};
  // {src, dst} offsets; the destination lies kGuard (even) further on, so the first five keep dst - src even
  // and the last three make it odd, where no aligned access can serve both sides.
  const std::pair<std::size_t, std::size_t> offsets[] = {{0, 0},  {1, 1}, {3, 5}, {8, 0},
                                                         {16, 4}, {0, 3}, {5, 0}, {7, 12}};
  const std::size_t capacity = (1u << 20) + 5 + 2 * kGuard + 32;

  auto* sym = static_cast<std::byte*>(w.malloc(capacity));
  std::byte* local = nullptr;
  ASSERT_EQ(cudaMalloc(&local, capacity), cudaSuccess);
  int target = next_pe(w), source = prev_pe(w);
  std::uint64_t case_id = 0;

  for (rma_op op : {rma_op::put, rma_op::put_nbi, rma_op::get, rma_op::get_nbi}) {
    for (std::size_t n : sizes) {
      if (n > max_bytes) continue;
      for (auto [src_off, dst_off] : offsets) {
        ++case_id;
        SCOPED_TRACE(std::string(name(op)) + " n=" + std::to_string(n) + " src_off=" + std::to_string(src_off) +
                     " dst_off=" + std::to_string(dst_off));
        bool is_put = op == rma_op::put || op == rma_op::put_nbi;
        // Every PE fills both buffers with patterns the others can recompute from (case, pe).
        auto sym_bytes = [&](int pe) { return random_bytes(case_id * 1000 + 2 * pe, capacity); };
        auto local_bytes = [&](int pe) { return random_bytes(case_id * 1000 + 2 * pe + 1, capacity); };
        upload(sym, sym_bytes(w.pe()));
        upload(local, local_bytes(w.pe()));
        barrier_all(w);

        // put: my local[src_off..] -> target's sym[kGuard+dst_off..]. get: target's sym[src_off..] -> my
        // local[kGuard+dst_off..].
        std::byte* remote_side = is_put ? sym + kGuard + dst_off : sym + src_off;
        std::byte* local_side = is_put ? local + src_off : local + kGuard + dst_off;
        rma_kernel<Scope><<<shape.blocks, shape.threads>>>(w.device_handle(), op, remote_side, local_side, n, target);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        barrier_all(w);

        std::vector<std::uint8_t> expected, actual;
        if (is_put) {  // my sym was written by `source`
          expected = sym_bytes(w.pe());
          auto sent = local_bytes(source);
          std::memcpy(expected.data() + kGuard + dst_off, sent.data() + src_off, n);
          actual = download(sym, capacity);
        } else {  // my local was filled from `target`'s sym
          expected = local_bytes(w.pe());
          auto read = sym_bytes(target);
          std::memcpy(expected.data() + kGuard + dst_off, read.data() + src_off, n);
          actual = download(local, capacity);
        }
        EXPECT_EQ(first_mismatch(actual, expected), -1);
        barrier_all(w);  // nobody refills before everyone checked
      }
    }
  }
  cudaFree(local);
  w.free(sym);
}

TEST(Rma, ThreadScope) {
  SHOAL_REQUIRE_WORLD(1);
  run_matrix<thread_scope>({1, 1}, 65536 + 9);
}
TEST(Rma, WarpScope) {
  SHOAL_REQUIRE_WORLD(1);
  run_matrix<warp_scope>({1, 32}, 1u << 21);
}
TEST(Rma, BlockScope) {
  SHOAL_REQUIRE_WORLD(1);
  run_matrix<block_scope>({1, 256}, 1u << 21);
}
TEST(Rma, GridScope) {
  SHOAL_REQUIRE_WORLD(1);
  run_matrix<grid_scope>({4, 128}, 1u << 21);
}

// A stream of small messages by one scope and one quiet at the end. Block- and grid-scope copies start at a
// warp hashed from each message's address and their idle threads leave at once (detail::spread_rank), so
// consecutive messages run on different warps at the same time; every message must still land whole.
struct message {
  std::uint32_t src_off, dst_off, bytes;
};

template <typename Scope>
__global__ void stream_kernel(device_handle h, bool is_put, const message* msgs, int count, std::byte* sym,
                              std::byte* local, int pe) {
  Scope scope;
  // At block scope CTA b takes every gridDim.x-th message from b on; at grid scope the grid takes them all.
  constexpr bool kPerBlock = std::is_same_v<Scope, block_scope>;
  for (int i = kPerBlock ? int(blockIdx.x) : 0; i < count; i += kPerBlock ? int(gridDim.x) : 1) {
    const message m = msgs[i];
    if (is_put)
      put_bytes_nbi(scope, h, sym + m.dst_off, local + m.src_off, m.bytes, pe);
    else
      get_bytes_nbi(scope, h, local + m.dst_off, sym + m.src_off, m.bytes, pe);
  }
  quiet(scope, h);
}

template <typename Scope>
void run_stream(launch_shape shape) {
  shoal::world& w = *the_world();
  constexpr std::uint32_t kRegion = 1u << 20, kMaxBytes = 4100;
  constexpr int kMessages = 300;
  // Sizes from 0 to past one pass of a 256-thread CTA, offsets at every alignment; destinations end to end
  // with gaps of 0-17 bytes, so they are disjoint. A fixed seed: every PE builds the same list, so the
  // receiver knows what was sent.
  std::mt19937 rng(4242);
  std::vector<message> msgs(kMessages);
  std::uint32_t next_dst = 0;
  for (message& m : msgs) {
    m.bytes = std::uniform_int_distribution<std::uint32_t>(0, kMaxBytes)(rng);
    m.src_off = std::uniform_int_distribution<std::uint32_t>(0, kRegion - kMaxBytes)(rng);
    next_dst += std::uniform_int_distribution<std::uint32_t>(0, 17)(rng);
    m.dst_off = next_dst;
    next_dst += m.bytes;
  }
  ASSERT_LE(next_dst, kRegion);
  message* device_msgs = nullptr;
  CUDA_OK(cudaMalloc(&device_msgs, sizeof(message) * kMessages));
  CUDA_OK(cudaMemcpy(device_msgs, msgs.data(), sizeof(message) * kMessages, cudaMemcpyHostToDevice));
  auto* sym = static_cast<std::byte*>(w.malloc(kRegion));
  std::byte* local = nullptr;
  CUDA_OK(cudaMalloc(&local, kRegion));
  const int target = next_pe(w), source = prev_pe(w);

  for (bool is_put : {true, false}) {
    SCOPED_TRACE(is_put ? "put_nbi stream" : "get_nbi stream");
    const std::uint64_t seed = is_put ? 7000 : 8000;
    auto sym_bytes = [&](int pe) { return random_bytes(seed + 2 * pe, kRegion); };
    auto local_bytes = [&](int pe) { return random_bytes(seed + 2 * pe + 1, kRegion); };
    upload(sym, sym_bytes(w.pe()));
    upload(local, local_bytes(w.pe()));
    barrier_all(w);
    stream_kernel<Scope>
        <<<shape.blocks, shape.threads>>>(w.device_handle(), is_put, device_msgs, kMessages, sym, local, target);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    barrier_all(w);

    // put: `source` wrote my sym from its local. get: my local was filled from `target`'s sym.
    std::vector<std::uint8_t> expected = is_put ? sym_bytes(w.pe()) : local_bytes(w.pe());
    const std::vector<std::uint8_t> sent = is_put ? local_bytes(source) : sym_bytes(target);
    for (const message& m : msgs) std::memcpy(expected.data() + m.dst_off, sent.data() + m.src_off, m.bytes);
    EXPECT_EQ(first_mismatch(download(is_put ? sym : local, kRegion), expected), -1);
    barrier_all(w);  // nobody refills before everyone checked
  }
  CUDA_OK(cudaFree(local));
  CUDA_OK(cudaFree(device_msgs));
  w.free(sym);
}

TEST(Rma, BlockScopeStreamOfSmallMessages) {
  SHOAL_REQUIRE_WORLD(1);
  run_stream<block_scope>({4, 1024});
}
TEST(Rma, GridScopeStreamOfSmallMessages) {
  SHOAL_REQUIRE_WORLD(1);
  run_stream<grid_scope>({4, 256});
}

// p / g on several element types: thread t of the kernel puts values[t] into element t of the target's
// first half and gets element t of its second half. Both halves start at random values, and what a PE
// puts differs from what it overwrites.
template <typename T>
__global__ void p_g_kernel(device_handle h, T* sym, const T* values, T* got, int count, int pe) {
  int t = threadIdx.x;
  if (t >= count) return;
  p(h, sym + t, values[t], pe);
  quiet(h);
  got[t] = g(h, sym + count + t, pe);
}

// A random value of T for (salt, pe, element, role), the same on every PE.
template <typename T>
T scalar_value(std::uint64_t salt, int pe, int element, int role) {
  std::mt19937_64 rng(((salt * 1000003 + std::uint64_t(pe)) * 4099 + std::uint64_t(element)) * 4 + std::uint64_t(role));
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(static_cast<std::int64_t>(rng() % 2000001) - 1000000) / T(8);  // exact in float
  else
    return static_cast<T>(rng());
}

template <typename T>
void check_p_g() {
  shoal::world& w = *the_world();
  const int kCount = 64;
  const std::uint64_t salt = 5 + sizeof(T) + (std::is_floating_point_v<T> ? 100 : 0);
  enum { kHeld = 0, kRead = 1, kPut = 2 };
  // What `pe` puts into element t of the next PE's first half: never what is there already.
  auto put_by = [&](int pe, int t) {
    const T held = scalar_value<T>(salt, (pe + 1) % w.n_pes(), t, kHeld);
    const T v = scalar_value<T>(salt, pe, t, kPut);
    return v == held ? static_cast<T>(v + T(1)) : v;
  };
  T* sym = w.malloc_array<T>(2 * kCount);
  T *got = nullptr, *values = nullptr;
  ASSERT_EQ(cudaMalloc(&got, kCount * sizeof(T)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&values, kCount * sizeof(T)), cudaSuccess);
  std::vector<T> mine(2 * kCount), to_put(kCount);
  for (int i = 0; i < kCount; ++i) {
    mine[i] = scalar_value<T>(salt, w.pe(), i, kHeld);
    mine[kCount + i] = scalar_value<T>(salt, w.pe(), i, kRead);
    to_put[i] = put_by(w.pe(), i);
  }
  ASSERT_EQ(cudaMemcpy(sym, mine.data(), mine.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(values, to_put.data(), kCount * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // landed before peers read or write it (see upload())
  barrier_all(w);
  p_g_kernel<<<1, kCount>>>(w.device_handle(), sym, values, got, kCount, next_pe(w));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  barrier_all(w);
  std::vector<T> written(2 * kCount), read(kCount);
  ASSERT_EQ(cudaMemcpy(written.data(), sym, written.size() * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(read.data(), got, kCount * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int t = 0; t < kCount; ++t) {
    EXPECT_EQ(written[t], put_by(prev_pe(w), t)) << "element " << t;
    EXPECT_EQ(written[kCount + t], mine[kCount + t]) << "element " << t << " of the half that is only read";
    EXPECT_EQ(read[t], scalar_value<T>(salt, next_pe(w), t, kRead)) << "element " << t;
  }
  barrier_all(w);
  cudaFree(values);
  cudaFree(got);
  w.free(sym);
}

TEST(Rma, ScalarPG) {
  SHOAL_REQUIRE_WORLD(1);
  check_p_g<std::int8_t>();
  check_p_g<std::uint16_t>();
  check_p_g<int>();
  check_p_g<std::uint64_t>();
  check_p_g<float>();
  check_p_g<double>();
}

// ptr() gives a usable address for reachable PEs and the same object.
__global__ void ptr_kernel(device_handle h, int* sym, int pe, int* out) { *out = *ptr(h, sym, pe); }

TEST(Rma, PtrReachesPeerObject) {
  SHOAL_REQUIRE_WORLD(1);
  SHOAL_REQUIRE_ONE_NODE();
  shoal::world& w = *the_world();
  int* sym = w.malloc_array<int>(1);
  int mine = 1000 + w.pe();
  ASSERT_EQ(cudaMemcpy(sym, &mine, sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  barrier_all(w);
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, sizeof(int)), cudaSuccess);
  ptr_kernel<<<1, 1>>>(w.device_handle(), sym, next_pe(w), out);
  int seen = 0;
  ASSERT_EQ(cudaMemcpy(&seen, out, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(seen, 1000 + next_pe(w));
  EXPECT_EQ(w.ptr(sym, w.pe()), sym);
  EXPECT_NE(w.ptr(sym, next_pe(w)), nullptr);
  barrier_all(w);
  cudaFree(out);
  w.free(sym);
}

}  // namespace
}  // namespace shoal::gpu_test
