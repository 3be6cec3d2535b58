// The symmetric heap on the GPU: growth during a run (with RMA into the new memory through a handle
// taken before the growth), free with RMA still in flight to another node, usage queries, and bad input on
// every host path.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "../common/open_file_limit.hpp"
#include "gpu_env.hpp"
#include "host/cuda_check.hpp"
#include "host/driver_api.hpp"
#include "shoal/device.cuh"

namespace shoal::gpu_test {
namespace {

// Element by element with p() where the peer is mapped; through the proxy (another node) one p per
// element would be millions of messages, so there the pattern is built locally and sent with one
// grid-scope put after a grid_sync, which needs every CTA resident: the host launches few CTAs then (a PE
// under MPS may hold a quarter of the SMs or less). Either way through a handle taken before the growth.
__global__ void fill_remote(device_handle h, std::uint32_t* dst, std::uint32_t* local, std::size_t count, int pe,
                            std::uint32_t salt) {
  const bool mapped = ptr(h, dst, pe) != nullptr;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const std::uint32_t value = std::uint32_t(i * 2654435761u) ^ salt;
    if (mapped)
      p(h, dst + i, value, pe);
    else
      local[i] = value;
  }
  if (mapped) return;
  __threadfence();
  grid_sync(h);
  put(grid, h, dst, local, count, pe);
}

// Each PE writes a pattern into `count` words of the next PE's `dst` through `h` (a handle that may predate
// the allocation) and checks what the previous PE wrote into its own.
void expect_pattern_crosses(shoal::world& w, device_handle h, std::uint32_t* dst, std::size_t count) {
  std::uint32_t* local = nullptr;
  ASSERT_EQ(cudaMalloc(&local, count * sizeof(std::uint32_t)), cudaSuccess);
  const int ctas = w.ptr(dst, next_pe(w)) != nullptr ? 132 : 8;
  fill_remote<<<ctas, 256>>>(h, dst, local, count, next_pe(w), 0x5EED0000u + w.pe());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaFree(local), cudaSuccess);
  barrier_all(w);
  std::vector<std::uint32_t> got(count);
  ASSERT_EQ(cudaMemcpy(got.data(), dst, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < count; ++i)
    bad += got[i] != (std::uint32_t(i * 2654435761u) ^ (0x5EED0000u + prev_pe(w)));
  EXPECT_EQ(bad, 0u);
  barrier_all(w);
}

TEST(Heap, GrowsDuringRunAndOldHandlesStayValid) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  device_handle before = w.device_handle();
  heap_stats start = w.heap_usage();
  // 8 MiB more than is free now: the heap must grow, by a chunk or a few (so that runs repeated in one
  // process, which keep what earlier runs mapped, reach the maximum only after many repeats). The growth
  // is at most `bytes` (when the top of the heap is in use), so that decides the skip.
  const std::uint64_t bytes = start.mapped - start.used + (8u << 20);
  if (start.mapped + bytes > start.max_size)  // heap_usage() is the same on every PE: all skip or none
    GTEST_SKIP() << "earlier runs in this process grew the heap near SHOAL_HEAP_MAX_SIZE (" << start.mapped
                 << " bytes mapped)";
  std::size_t count = bytes / sizeof(std::uint32_t);
  auto* big = w.malloc_array<std::uint32_t>(count);
  ASSERT_NE(big, nullptr);
  heap_stats grown = w.heap_usage();
  EXPECT_GT(grown.mapped, start.mapped);
  EXPECT_GE(grown.used, start.used + count * sizeof(std::uint32_t));
  EXPECT_EQ(w.device_handle().heap_base, before.heap_base);
  expect_pattern_crosses(w, before, big, count);
  w.free(big);
  EXPECT_EQ(w.heap_usage().used, start.used);
}

// A growth that fails on one PE partway (its limit of open files stops it exporting its new chunks, or
// receiving its peers') must fail on every PE and grow no PE's heap: every PE keeps the same mapped size,
// and nothing it mapped or queued is mistaken for new memory by the next growth, which must work and map
// each peer's real chunks.
TEST(Heap, GrowthThatFailsOnOnePeGrowsNoHeapAndTheNextWorks) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  device_handle before = w.device_handle();
  const heap_stats start = w.heap_usage();
  constexpr std::uint64_t kChunks = 8;  // the growth is at least this many chunks
  const std::uint64_t bytes = start.mapped - start.used + kChunks * start.chunk_size;
  if (start.mapped + bytes > start.max_size)
    GTEST_SKIP() << "earlier runs in this process grew the heap near SHOAL_HEAP_MAX_SIZE (" << start.mapped
                 << " bytes mapped)";
  const int limited_pe = w.n_pes() - 1;
  const bool limited = w.pe() == limited_pe;
  // With room for its own exports, the limited PE fails only if it has node-local peers to receive from.
  std::int32_t limited_has_peers = w.bootstrap().local_size() > 1 ? 1 : 0;
  w.bootstrap().broadcast(&limited_has_peers, sizeof limited_has_peers, limited_pe);
  struct attempt {
    int room;
    bool fails;
  };
  for (const attempt a : {attempt{2, true}, attempt{int(kChunks) + 2, limited_has_peers != 0}}) {
    SCOPED_TRACE(::testing::Message() << "room for " << a.room << " more open files on PE " << limited_pe);
    void* p = nullptr;
    std::string what;
    {
      std::optional<shoal_test::open_file_limit> limit;
      if (limited) {
        limit.emplace(a.room);
        EXPECT_TRUE(limit->ok());
      }
      try {
        p = w.malloc(bytes);
      } catch (const shoal::error& e) {
        what = e.what();
      }
    }
    if (!a.fails) {
      EXPECT_NE(p, nullptr);
      w.free(p);
      continue;
    }
    EXPECT_EQ(p, nullptr) << "the growth succeeded on this PE";
    EXPECT_NE(what.find("no PE's heap grew"), std::string::npos) << what;
    EXPECT_EQ(w.heap_usage().mapped, start.mapped) << what;
    EXPECT_EQ(w.heap_usage().used, start.used);
  }
  const std::size_t count = bytes / sizeof(std::uint32_t);
  auto* big = w.malloc_array<std::uint32_t>(count);
  ASSERT_NE(big, nullptr);
  EXPECT_GT(w.heap_usage().mapped, start.mapped);
  expect_pattern_crosses(w, before, big, count);
  w.free(big);
}

template <typename Call>
void expect_error(errc category, const char* needle, Call call) {
  try {
    call();
    ADD_FAILURE() << "no shoal::error thrown (expected one mentioning '" << needle << "')";
  } catch (const shoal::error& e) {
    EXPECT_EQ(e.category(), category) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Heap, BadInputIsAClearErrorAndChangesNothing) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  auto* obj = static_cast<std::uint8_t*>(w.malloc(4096));
  std::uint8_t host[64] = {};
  heap_stats before = w.heap_usage();
  expect_error(errc::invalid_argument, "out of range", [&] { put(w, obj, host, 16, w.n_pes()); });
  expect_error(errc::invalid_argument, "out of range", [&] { get(w, host, obj, 16, -1); });
  expect_error(errc::invalid_argument, "not inside", [&] { put(w, host, host, 16, 0); });
  expect_error(errc::invalid_argument, "not inside", [&] { put(w, obj, host, before.mapped, 0); });
  expect_error(errc::invalid_argument, "not inside", [&] { w.ptr(host, 0); });
  expect_error(errc::invalid_argument, "power of two", [&] { w.align(48, 100); });
  // Past the heap's own alignment (the GPU's granularity) an offset aligned on one PE need not be on another.
  expect_error(errc::invalid_argument, "more than the symmetric heap can give", [&] { w.align(1ull << 30, 100); });
  {
    void* p = w.align(1 << 20, 100);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (1 << 20), 0u);
    w.free(p);
  }
  // A put or get of an object onto itself (to this PE) has nothing to copy; a partial overlap is refused.
  expect_error(errc::invalid_argument, "overlap", [&] { put(w, obj + 8, obj, 64, w.pe()); });
  expect_error(errc::invalid_argument, "overlap", [&] { get(w, obj, obj + 8, 64, w.pe()); });
  EXPECT_NO_THROW(put(w, obj, obj, 64, w.pe()));
  // No bytes: null symmetric and local pointers are fine; a null local buffer with bytes is not.
  EXPECT_NO_THROW(put(w, nullptr, nullptr, 0, 0));
  EXPECT_NO_THROW(get(w, nullptr, nullptr, 0, 0));
  expect_error(errc::invalid_argument, "out of range", [&] { put(w, nullptr, nullptr, 0, w.n_pes()); });
  expect_error(errc::invalid_argument, "the local buffer is null", [&] { put(w, obj, nullptr, 16, 0); });
  expect_error(errc::invalid_argument, "the local buffer is null", [&] { get(w, nullptr, obj, 16, 0); });
  // Mismatched sizes: every PE gets the error, nothing is allocated.
  if (w.n_pes() > 1) {
    expect_error(errc::invalid_argument, "disagree", [&] { w.malloc(1024 * (1 + w.pe())); });
    EXPECT_EQ(w.heap_usage().used, before.used);
  }
  // More than the heap may ever hold.
  expect_error(errc::out_of_memory, "SHOAL_HEAP_MAX_SIZE", [&] { w.malloc(before.max_size + 1); });
  EXPECT_EQ(w.heap_usage().used, before.used);
  // A size near 2^64 (the growth it needs once wrapped to a small number, and malloc failed as an internal error).
  expect_error(errc::out_of_memory, "SHOAL_HEAP_MAX_SIZE", [&] { w.malloc(SIZE_MAX); });
  expect_error(errc::out_of_memory, "SHOAL_HEAP_MAX_SIZE", [&] { w.align(4096, SIZE_MAX - 100); });
  EXPECT_EQ(w.heap_usage().used, before.used);
  // An element count whose bytes overflow (it wrapped to a small allocation).
  expect_error(errc::invalid_argument, "overflow", [&] { w.malloc_array<double>(SIZE_MAX / 8 + 2); });
  EXPECT_EQ(w.heap_usage().used, before.used);
  // Double free and foreign pointers.
  w.free(obj);
  expect_error(errc::invalid_argument, "not the start of a live allocation", [&] { w.free(obj); });
  expect_error(errc::invalid_argument, "not inside", [&] { w.free(host); });
  // The heap still works after all of that.
  void* again = w.malloc(4096);
  EXPECT_EQ(again, static_cast<void*>(obj));  // deterministic first fit reuses the freed block
  w.free(again);
}

// What a refused short local buffer must throw: errc::invalid_argument, naming the call.
template <typename Call>
void expect_short_buffer_refused(const char* call_name, Call call) {
  expect_error(errc::invalid_argument, (std::string("in ") + call_name + ": the local buffer [").c_str(), call);
  expect_error(errc::invalid_argument, "is shorter than the copy", call);
}

// Device memory that ends where nothing is mapped: one granule mapped at the start of a two-granule
// reservation. A copy that runs past its end ends in no allocation, wherever the CUDA allocator put anything
// else (past a cudaMalloc block there may be another one).
class memory_before_a_hole {
 public:
  memory_before_a_hole() {
    const auto& d = detail::driver();
    int device = 0;
    SHOAL_CUDA_CHECK(cudaGetDevice(&device));
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, device};
    SHOAL_CU_CHECK(d.mem_get_allocation_granularity(&granule_, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    SHOAL_CU_CHECK(d.mem_address_reserve(&base_, 2 * granule_, 0, 0, 0));
    reserved_ = true;
    try {
      SHOAL_CU_CHECK(d.mem_create(&memory_, granule_, &prop, 0));
      created_ = true;
      SHOAL_CU_CHECK(d.mem_map(base_, granule_, 0, memory_, 0));
      mapped_ = true;
      const CUmemAccessDesc access{prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
      SHOAL_CU_CHECK(d.mem_set_access(base_, granule_, &access, 1));
    } catch (...) {
      release();  // what the constructor got so far: no destructor runs for it
      throw;
    }
  }
  ~memory_before_a_hole() { release(); }
  memory_before_a_hole(const memory_before_a_hole&) = delete;
  memory_before_a_hole& operator=(const memory_before_a_hole&) = delete;

  std::uint8_t* end() const { return reinterpret_cast<std::uint8_t*>(base_ + granule_); }

 private:
  // Cannot throw: a failed release is reported and the test goes on.
  void release() noexcept {
    const auto& d = detail::driver();
    const bool ok = (!mapped_ || d.mem_unmap(base_, granule_) == CUDA_SUCCESS) &&
                    (!created_ || d.mem_release(memory_) == CUDA_SUCCESS) &&
                    (!reserved_ || d.mem_address_free(base_, 2 * granule_) == CUDA_SUCCESS);
    if (!ok) std::fprintf(stderr, "memory_before_a_hole: releasing the test's VMM memory failed\n");
  }

  std::size_t granule_ = 0;
  CUdeviceptr base_ = 0;
  CUmemGenericAllocationHandle memory_ = 0;
  bool reserved_ = false, created_ = false, mapped_ = false;
};

// A local buffer shorter than the copy, in the host forms of put and get (blocking and on a stream), is
// refused naming the call: where its last byte lies in no allocation, by shoal before anything moves (to
// another node too, before the proxy thread would copy it); where it lies in the next allocation, by CUDA's
// copy within a node. The refusal leaves nothing behind: the next calls work, a host atomic among them (a
// kernel launch checked through CUDA's last error, where a refused copy left uncleared would come back as
// the atomic's own error). A local buffer in the heap that spans chunks (the 2 MiB chunks of scripts/device-check.sh:
// separate mappings) is copied whole.
TEST(Heap, LocalBufferShorterThanTheCopyIsRefusedAndLeavesNothingBehind) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  constexpr std::size_t kShort = 4096, kLong = 3 * kShort;
  const int to = next_pe(w);
  auto* sym = static_cast<std::uint8_t*>(w.malloc(kLong));
  auto* counter = static_cast<std::uint64_t*>(w.calloc(1, sizeof(std::uint64_t)));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    const memory_before_a_hole hole;
    std::uint8_t* local = hole.end() - kShort;  // 4 KiB, then nothing
    expect_short_buffer_refused("shoal::put", [&] { put(w, sym, local, kLong, to); });
    expect_short_buffer_refused("shoal::get", [&] { get(w, local, sym, kLong, to); });
    expect_short_buffer_refused("shoal::put_on_stream", [&] { put_on_stream(w, sym, local, kLong, to, stream); });
    expect_short_buffer_refused("shoal::get_on_stream", [&] { get_on_stream(w, local, sym, kLong, to, stream); });
    expect_error(errc::invalid_argument, "is in no CUDA allocation", [&] { put(w, sym, local, kShort + 1, to); });
  }
  // Two 4 KiB blocks side by side, as cudaMalloc usually hands out small ones: a copy from the first that
  // runs into the second ends in memory CUDA knows, and CUDA's refusal of the copy tells (within a node;
  // to another node the proxy thread would make it). Not tried, saying so, when they lie apart.
  std::uint8_t* local = nullptr;
  std::uint8_t* next_block = nullptr;
  CUDA_OK(cudaMalloc(&local, kShort));
  CUDA_OK(cudaMalloc(&next_block, kShort));
  if (next_block != local + kShort) {
    std::printf("[note] two 4 KiB cudaMalloc blocks lie apart: CUDA's refusal of a copy not tried\n");
  } else if (w.ptr(sym, to) != nullptr) {
    expect_short_buffer_refused("shoal::put", [&] { put(w, sym, local, 2 * kShort, to); });
    expect_short_buffer_refused("shoal::get_on_stream", [&] { get_on_stream(w, local, sym, 2 * kShort, to, stream); });
    expect_error(errc::invalid_argument, "holds 4096 bytes from there",
                 [&] { put_on_stream(w, sym, local, kShort + 1, to, stream); });
  }
  barrier_all(w);  // every PE's counter is zero before any PE adds to it

  EXPECT_EQ(atomic_fetch_add(w, counter, std::uint64_t(1000 + w.pe()), to), 0u);
  const auto sent = random_bytes(610 + w.pe(), kShort);
  upload(local, sent);
  put(w, sym, local, kShort, to);
  put_on_stream(w, sym + kShort, local, kShort, to, stream);
  quiet_on_stream(w, stream);  // to another node the proxy completes it; within one, stream order does
  CUDA_OK(cudaStreamSynchronize(stream));
  barrier_all(w);
  const auto expected = random_bytes(610 + prev_pe(w), kShort);
  const auto got = download(sym, 2 * kShort);
  EXPECT_EQ(first_mismatch({got.begin(), got.begin() + kShort}, expected), -1);
  EXPECT_EQ(first_mismatch({got.begin() + kShort, got.end()}, expected), -1);
  EXPECT_EQ(g(w, counter, w.pe()), std::uint64_t(1000 + prev_pe(w)));

  // The heap as the local side, an object of more than one 2 MiB chunk: put to the next PE, get it back.
  const std::size_t n = (3u << 20) + 17;
  auto* mine = static_cast<std::uint8_t*>(w.malloc(n));
  auto* theirs = static_cast<std::uint8_t*>(w.malloc(n));
  const auto pattern = random_bytes(620 + w.pe(), n);
  upload(mine, pattern);
  put(w, theirs, mine, n, to);
  barrier_all(w);
  EXPECT_EQ(first_mismatch(download(theirs, n), random_bytes(620 + prev_pe(w), n)), -1);
  upload(mine, std::vector<std::uint8_t>(n, 0));
  get(w, mine, theirs, n, to);  // the next PE's `theirs` holds what this PE sent
  EXPECT_EQ(first_mismatch(download(mine, n), pattern), -1);
  barrier_all(w);

  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(next_block));
  CUDA_OK(cudaFree(local));
  w.free(theirs);
  w.free(mine);
  w.free(counter);
  w.free(sym);
}

// A bad argument on one PE only (a foreign pointer, an alignment that is not a power of two, a count whose
// bytes overflow) is a mismatch like any other: every PE gets the error and nothing changes. Each of these
// used to throw on that PE before the PEs agreed on the call, leaving the others waiting in the agreement:
// their call then failed with the next collective of that PE (here its barrier_all, failing the job), or
// had that PE made another heap call next, was paired with that one.
TEST(Heap, BadInputOnOnePeFailsTheCallOnEveryPe) {
  SHOAL_REQUIRE_WORLD(2);
  shoal::world& w = *the_world();
  const bool odd_one = w.pe() == w.n_pes() - 1;
  auto* obj = static_cast<std::uint8_t*>(w.malloc(4096));
  std::uint8_t host[64] = {};
  const heap_stats before = w.heap_usage();
  expect_error(errc::invalid_argument, "disagree", [&] { w.free(odd_one ? static_cast<void*>(host) : obj); });
  barrier_all(w);
  expect_error(errc::invalid_argument, "disagree", [&] { w.align(odd_one ? 48 : 256, 4096); });
  barrier_all(w);
  expect_error(errc::invalid_argument, "disagree", [&] { w.calloc(odd_one ? SIZE_MAX / 8 + 2 : 16, 8); });
  barrier_all(w);
  expect_error(errc::invalid_argument, "disagree", [&] { w.malloc_array<double>(odd_one ? SIZE_MAX / 8 + 2 : 16); });
  barrier_all(w);
  EXPECT_EQ(w.heap_usage().used, before.used);
  // The same bad argument on every PE fails each PE with its own reason, after the agreement.
  expect_error(errc::invalid_argument, "overflows", [&] { w.calloc(SIZE_MAX / 8 + 2, 8); });
  expect_error(errc::invalid_argument, "not inside", [&] { w.free(host); });
  w.free(obj);  // still live on every PE: no failed call released it
  EXPECT_EQ(w.heap_usage().used, before.used - 4096);
}

__global__ void put_and_leave(device_handle h, std::uint8_t* dst, const std::uint8_t* src, std::size_t n, int pe) {
  put_nbi(block, h, dst, src, n, pe);  // no quiet: through the proxy the put is still in flight at the end
}

// A kernel's put_nbi to another node that nothing waited for is still in flight (through the proxy, for
// milliseconds at this size) when the host frees its target. free must complete it first: else the
// target's PE reuses the memory for the next allocation, and the late put lands in that. Within a node the
// put is complete when the kernel ends, and the test passes trivially.
TEST(Heap, FreeCompletesPutsStillInFlight) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  constexpr std::size_t n = std::size_t{32} << 20;
  auto* target = static_cast<std::uint8_t*>(w.malloc(n));
  std::uint8_t* src = nullptr;
  ASSERT_EQ(cudaMalloc(&src, n), cudaSuccess);
  upload(src, random_bytes(9100 + w.pe(), n));
  barrier_all(w);
  put_and_leave<<<1, 256>>>(w.device_handle(), target, src, n, next_pe(w));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  w.free(target);
  auto* reused = static_cast<std::uint8_t*>(w.malloc(n));
  EXPECT_EQ(reused, target);            // deterministic first fit: the same memory
  constexpr std::uint8_t kMine = 0x5A;  // what the new allocation holds; the late put's bytes are random
  ASSERT_EQ(cudaMemset(reused, kMine, n), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  barrier_all(w);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time for a put left in flight to land
  barrier_all(w);
  std::vector<std::uint8_t> got(n);
  ASSERT_EQ(cudaMemcpy(got.data(), reused, n, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(first_mismatch(got, std::vector<std::uint8_t>(n, kMine)), -1)
      << "a put issued before free landed in the memory after it";
  ASSERT_EQ(cudaFree(src), cudaSuccess);
  w.free(reused);
}

TEST(Heap, DeviceHandleDescribesTheNode) {
  SHOAL_REQUIRE_WORLD(1);
  shoal::world& w = *the_world();
  device_handle h = w.device_handle();
  EXPECT_EQ(h.pe, w.pe());
  EXPECT_EQ(h.n_pes, w.n_pes());
  EXPECT_EQ(h.local_size, w.bootstrap().local_size());
  EXPECT_GE(h.slot_stride, std::int64_t(h.heap_capacity));
  EXPECT_NE(h.sync, nullptr);
}

}  // namespace
}  // namespace shoal::gpu_test
