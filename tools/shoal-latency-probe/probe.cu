// shoal-latency-probe: ping-pong between PE 0 and PE 1 with each way of storing and polling a flag,
// with and without the fence a put_signal needs. It explains the latency rows of shoal-perf: what a
// system-scope fence costs, and what acquire polling costs against plain polling. Run under shoalrun
// with 2 PEs; PE 0 prints one-way latencies (round trip / 2, median of several kernels).
#include <cuda/atomic>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_common.hpp"
#include "shoal/device.cuh"
#include "shoal/shoal.hpp"

namespace {

enum class store_kind { volatile_store, release_store, fence_sc_then_store, fence_acq_rel_then_store, red_release_add };
enum class poll_kind { volatile_poll, acquire_poll, relaxed_then_acquire };

enum class data_kind { none, from_register, from_memory, far_buffer };

struct variant {
  const char* name;
  store_kind store;
  poll_kind poll;
  data_kind data;             // 8 bytes stored to the peer before the flag, as put_signal does
  bool library_send = false;  // send with shoal::put_signal (8 bytes + signal set) instead
  bool library_wait = false;  // wait with shoal::wait_until instead
};

__device__ void store_flag(std::uint64_t* remote, std::uint64_t value, store_kind kind) {
  switch (kind) {
    case store_kind::volatile_store: *reinterpret_cast<volatile std::uint64_t*>(remote) = value; break;
    case store_kind::release_store: asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(remote), "l"(value) : "memory"); break;
    case store_kind::fence_sc_then_store:
      asm volatile("fence.sc.sys;" ::: "memory");
      asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(remote), "l"(value) : "memory");
      break;
    case store_kind::fence_acq_rel_then_store:
      asm volatile("fence.acq_rel.sys;" ::: "memory");
      asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(remote), "l"(value) : "memory");
      break;
    case store_kind::red_release_add: asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(remote), "l"(1ull) : "memory"); break;
  }
}

__device__ std::uint64_t load_flag(const std::uint64_t* p, poll_kind kind) {
  std::uint64_t v;
  if (kind == poll_kind::acquire_poll) asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else if (kind == poll_kind::relaxed_then_acquire) asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else v = *reinterpret_cast<const volatile std::uint64_t*>(p);
  return v;
}

__device__ void wait_flag(const std::uint64_t* p, std::uint64_t want, poll_kind kind) {
  while (load_flag(p, kind) < want) {
  }
  if (kind == poll_kind::relaxed_then_acquire) {  // one acquire re-load makes the observation an acquire
    [[maybe_unused]] std::uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  }
}

__device__ std::uint64_t now_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// words[0]: flag, words[1]: data next to it, words[kFar]: data on another page. `source` is local
// device memory holding the data. Values only grow, so a kernel can start where the last one ended.
constexpr int kFar = 1 << 16;

__global__ void pingpong(shoal::device_handle h, std::uint64_t* words, const std::uint64_t* source, variant v,
                         std::uint64_t first, int iters, std::uint64_t* elapsed_ns) {
  const int peer = 1 - h.pe;
  std::uint64_t* remote_flag = shoal::ptr(h, words, peer);
  std::uint64_t* data = words + (v.data == data_kind::far_buffer ? kFar : 1);
  std::uint64_t* remote_data = shoal::ptr(h, data, peer);
  std::uint64_t t0 = now_ns();
  for (int i = 0; i < iters; ++i) {
    const std::uint64_t value = first + i + 1;
    auto send = [&] {
      if (v.library_send) {
        shoal::put_signal(shoal::thread, h, data, source, 1, words, value, shoal::sig_op::set, peer);
        return;
      }
      if (v.data == data_kind::from_register) *reinterpret_cast<volatile std::uint64_t*>(remote_data) = value;
      if (v.data == data_kind::from_memory || v.data == data_kind::far_buffer)
        *reinterpret_cast<volatile std::uint64_t*>(remote_data) = *source;
      store_flag(remote_flag, value, v.store);
    };
    auto wait = [&] {
      if (v.library_wait) shoal::wait_until(h, words, shoal::cmp::ge, value);
      else wait_flag(words, value, v.poll);
    };
    if (h.pe == 0) {
      send();
      wait();
    } else {
      wait();
      send();
    }
  }
  *elapsed_ns = now_ns() - t0;
}

int run() {
  shoal::world w = shoal::init();
  if (w.n_pes() != 2) {
    std::printf("shoal-latency-probe needs exactly 2 PEs (have %d)\n", w.n_pes());
    return w.n_pes() == 1 ? 0 : 2;
  }
  const variant variants[] = {
      {"volatile store, volatile poll (flag ceiling)", store_kind::volatile_store, poll_kind::volatile_poll, data_kind::none},
      {"volatile store, acquire poll (p + wait_until)", store_kind::volatile_store, poll_kind::acquire_poll, data_kind::none},
      {"volatile store, relaxed poll + acquire re-load", store_kind::volatile_store, poll_kind::relaxed_then_acquire, data_kind::none},
      {"no data, st.release.sys flag, acquire poll", store_kind::release_store, poll_kind::acquire_poll, data_kind::none},
      {"data + st.release.sys flag, acquire poll", store_kind::release_store, poll_kind::acquire_poll, data_kind::from_register},
      {"data + fence.sc.sys + flag, acquire poll", store_kind::fence_sc_then_store, poll_kind::acquire_poll, data_kind::from_register},
      {"data + fence.acq_rel.sys + flag, acquire poll", store_kind::fence_acq_rel_then_store, poll_kind::acquire_poll, data_kind::from_register},
      {"data + red.release.sys.add flag, acquire poll", store_kind::red_release_add, poll_kind::acquire_poll, data_kind::from_register},
      {"data loaded from memory + st.release flag", store_kind::release_store, poll_kind::acquire_poll, data_kind::from_memory},
      {"data to another page + st.release flag", store_kind::release_store, poll_kind::acquire_poll, data_kind::far_buffer},
      {"data + st.release flag, shoal::wait_until", store_kind::release_store, poll_kind::acquire_poll, data_kind::from_register, false, true},
      {"shoal::put_signal (8 B), acquire poll", store_kind::release_store, poll_kind::acquire_poll, data_kind::from_memory, true, false},
      {"shoal::put_signal (8 B), shoal::wait_until", store_kind::release_store, poll_kind::acquire_poll, data_kind::from_memory, true, true},
  };
  auto* words = static_cast<std::uint64_t*>(w.calloc(kFar + 1, sizeof(std::uint64_t)));
  std::uint64_t* source = nullptr;
  const std::uint64_t pattern = 0x5A5A5A5A12345678ull;
  PROBE_CUDA(cudaMalloc(&source, sizeof(std::uint64_t)));
  PROBE_CUDA(cudaMemcpy(source, &pattern, sizeof pattern, cudaMemcpyHostToDevice));
  std::uint64_t* elapsed = nullptr;
  PROBE_CUDA(cudaMalloc(&elapsed, sizeof(std::uint64_t)));
  const int kIters = 20000, kReps = 5;
  std::uint64_t next = 0;
  for (const variant& v : variants) {
    std::vector<double> one_way_us;
    for (int rep = 0; rep < kReps; ++rep) {
      // The red.add variant adds 1 per message: the flag then counts messages, like the others' values.
      pingpong<<<1, 1>>>(w.device_handle(), words, source, v, next, kIters, elapsed);
      PROBE_CUDA(cudaGetLastError());
      PROBE_CUDA(cudaDeviceSynchronize());
      next += kIters;
      std::uint64_t ns = 0;
      PROBE_CUDA(cudaMemcpy(&ns, elapsed, sizeof ns, cudaMemcpyDeviceToHost));
      one_way_us.push_back(double(ns) / kIters / 2 / 1000);
      barrier_all(w);
    }
    std::sort(one_way_us.begin(), one_way_us.end());
    if (w.pe() == 0) std::printf("%-52s one way %.3f us (median of %d)\n", v.name, one_way_us[kReps / 2], kReps);
  }
  barrier_all(w);
  w.free(words);
  PROBE_CUDA(cudaFree(source));
  PROBE_CUDA(cudaFree(elapsed));
  return 0;
}

}  // namespace

int main() { return shoal::probe::main_reporting_errors(run); }
