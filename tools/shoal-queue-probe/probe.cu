// shoal-queue-probe: which CUDA streams of this process wait behind a kernel that does not end. The driver
// maps streams onto a few hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default, 2 under MPS).
// A running kernel does not hold its queue; work that must wait does (a kernel behind it on its stream, a
// wait on an event), and once every queue has such work at its head, work on any stream waits. The proxy
// lands other nodes' puts, signals and atomics with work on its own stream, so a kernel waiting for them
// then never ends. docs/perf-notes.md, entry 60, has the measurements; docs/proxy-design.md, "Hardware
// work queues", the consequences.
//
// One process, no shoal job. A one-thread kernel spins on stream 0 until the host releases it, with
// --behind kernels queued after it on its stream (default 1); --held H makes streams 1 .. H-1 hold waiting
// work too, each a wait on an event recorded after the spinner (as a pipeline's helper stream waits for the
// main one). Then each other stream, in creation order, gets one piece of work (a stream memory write, a
// one-thread kernel, or a copy from pinned memory), and the probe waits up to --wait-ms for it. Prints the
// numbers of the streams whose work did not finish while the spinner ran.
//
//   shoal-queue-probe [--streams N] [--work write|kernel|copy] [--spinner user|legacy]
//                     [--priority same|high] [--behind K] [--held H] [--wait-ms T]
// --priority high creates the probed streams at the greatest priority (the proxy's stream is one).
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "probe_common.hpp"
#include "shoal/dev/detail/spin.cuh"

namespace {

// Spins until *release is set (the host writes it through mapped pinned memory) or 20 s pass, so that a
// probe that goes wrong cannot leave the GPU busy.
__global__ void spinner(volatile const int* release, volatile int* started) {
  *started = 1;
  __threadfence_system();
  shoal::detail::spin_until([&] { return *release != 0; }, 20'000'000'000ull);
}

__global__ void touch(std::uint64_t* word) { *word += 1; }

struct options {
  int streams = 40;
  std::string work = "write";
  std::string spinner_on = "user";
  std::string priority = "same";
  int behind = 1;
  int held = 1;
  int wait_ms = 50;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    int* number = key == "--streams"   ? &o.streams
                  : key == "--behind"  ? &o.behind
                  : key == "--held"    ? &o.held
                  : key == "--wait-ms" ? &o.wait_ms
                                       : nullptr;
    std::string* word = key == "--work"       ? &o.work
                        : key == "--spinner"  ? &o.spinner_on
                        : key == "--priority" ? &o.priority
                                              : nullptr;
    if (number != nullptr) {
      *number = std::atoi(value.c_str());
    } else if (word != nullptr) {
      *word = value;
    } else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  if (o.streams < 2 || o.held < 1 || o.held >= o.streams ||
      (o.work != "write" && o.work != "kernel" && o.work != "copy") ||
      (o.spinner_on != "user" && o.spinner_on != "legacy") || (o.priority != "same" && o.priority != "high")) {
    std::fprintf(stderr, "bad option value (see the comment at the top of probe.cu)\n");
    std::exit(2);
  }
  return o;
}

// Issues one piece of work on `s`; true when it finished within wait_ms.
bool finishes(cudaStream_t s, const options& o, std::uint64_t* word, const std::uint64_t* pinned) {
  if (o.work == "write") {
    const CUresult r = cuStreamWriteValue64(s, reinterpret_cast<CUdeviceptr>(word), 7, 0);
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "cuStreamWriteValue64 failed: %d\n", int(r));
      std::exit(1);
    }
  } else if (o.work == "kernel") {
    touch<<<1, 1, 0, s>>>(word);
    PROBE_CUDA(cudaGetLastError());
  } else {
    PROBE_CUDA(cudaMemcpyAsync(word, pinned, sizeof *word, cudaMemcpyHostToDevice, s));
  }
  for (int ms = 0; ms <= o.wait_ms; ++ms) {
    const cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return true;
    if (q != cudaErrorNotReady) PROBE_CUDA(q);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

int run(int argc, char** argv) {
  const options o = parse(argc, argv);
  PROBE_CUDA(cudaSetDevice(0));
  PROBE_CUDA(cudaFree(nullptr));  // the context, before the timing-sensitive part
  int least = 0, greatest = 0;
  PROBE_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));

  // Stream 0 is the spinner's (unless it runs on the legacy stream); 1.. are probed, in creation order.
  std::vector<cudaStream_t> streams(o.streams);
  for (int i = 0; i < o.streams; ++i) {
    const int priority = (i > 0 && o.priority == "high") ? greatest : least;
    PROBE_CUDA(cudaStreamCreateWithPriority(&streams[i], cudaStreamNonBlocking, priority));
  }
  std::uint64_t* words = nullptr;
  PROBE_CUDA(cudaMalloc(&words, o.streams * sizeof(std::uint64_t)));
  int* flags = nullptr;  // [0] release, [1] started
  PROBE_CUDA(cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped));
  std::uint64_t* pinned = nullptr;
  PROBE_CUDA(cudaHostAlloc(&pinned, sizeof(std::uint64_t), cudaHostAllocDefault));
  flags[0] = flags[1] = 0;
  *pinned = 5;
  // Load the kernels first: with lazy loading a first launch could itself wait for the spinner.
  touch<<<1, 1>>>(words);
  PROBE_CUDA(cudaDeviceSynchronize());

  const cudaStream_t spin_stream = o.spinner_on == "legacy" ? cudaStreamLegacy : streams[0];
  spinner<<<1, 1, 0, spin_stream>>>(&flags[0], &flags[1]);
  PROBE_CUDA(cudaGetLastError());
  cudaEvent_t spun;
  PROBE_CUDA(cudaEventCreateWithFlags(&spun, cudaEventDisableTiming));
  PROBE_CUDA(cudaEventRecord(spun, spin_stream));
  for (int i = 0; i < o.behind; ++i) touch<<<1, 1, 0, spin_stream>>>(words);
  for (int i = 1; i < o.held; ++i) {
    PROBE_CUDA(cudaStreamWaitEvent(streams[i], spun));
    touch<<<1, 1, 0, streams[i]>>>(words + i);
  }
  PROBE_CUDA(cudaGetLastError());
  while (reinterpret_cast<volatile int*>(flags)[1] == 0) std::this_thread::yield();

  std::vector<int> blocked;
  for (int i = o.held; i < o.streams; ++i)
    if (!finishes(streams[i], o, words + i, pinned)) blocked.push_back(i);

  reinterpret_cast<volatile int*>(flags)[0] = 1;
  PROBE_CUDA(cudaDeviceSynchronize());

  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf(
      "work=%s spinner=%s behind=%d held=%d priority=%s streams=%d CUDA_DEVICE_MAX_CONNECTIONS=%s: %zu of %d probed "
      "streams waited for the spinner:",
      o.work.c_str(), o.spinner_on.c_str(), o.behind, o.held, o.priority.c_str(), o.streams,
      connections ? connections : "unset", blocked.size(), o.streams - o.held);
  for (const int i : blocked) std::printf(" %d", i);
  std::printf("\n");

  PROBE_CUDA(cudaEventDestroy(spun));
  for (cudaStream_t s : streams) PROBE_CUDA(cudaStreamDestroy(s));
  PROBE_CUDA(cudaFree(words));
  PROBE_CUDA(cudaFreeHost(flags));
  PROBE_CUDA(cudaFreeHost(pinned));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
