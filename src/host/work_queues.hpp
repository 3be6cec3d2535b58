// How many hardware work queues CUDA gives one process's streams, and what that means for the proxy.
//
// CUDA maps every stream of a process onto one of a few hardware queues (CUDA_DEVICE_MAX_CONNECTIONS of
// them; 8 by default, 2 for a client of MPS). A running kernel does not hold its queue, but work that must
// wait does: a kernel queued behind a running kernel on its stream, or a wait on an event. Once every queue
// has such work at its head, new work on any stream waits, whatever its priority. The proxy lands other
// nodes' puts, signals and atomics with work on its own stream, so a kernel that waits for another node
// while that many streams hold waiting work never ends. Measured with tools/shoal-queue-probe
// (docs/perf-notes.md, entry 60); docs/proxy-design.md, "Hardware work queues", says what to do.
#pragma once

#include <string>

namespace shoal::detail {

struct work_queue_count {
  int count = 0;
  std::string source;  // where the count comes from, for messages: "CUDA_DEVICE_MAX_CONNECTIONS=4", ...
};

// CUDA's defaults, as measured on an H200 with driver 580 (entry 60).
inline constexpr int kDefaultWorkQueues = 8;
inline constexpr int kDefaultWorkQueuesUnderMps = 2;
// The pipelined hierarchical all-reduce holds two queues while its kernels wait for the network phase (the
// caller's stream and the world's network stream); the proxy needs a third.
inline constexpr int kHierarchicalWorkQueues = 3;

// From CUDA_DEVICE_MAX_CONNECTIONS's value (null when unset) and whether the device is shared through MPS:
// the value when it is an integer from 1 to 32 (CUDA's range), else CUDA's default.
work_queue_count work_queues_from(const char* max_connections, bool under_mps);

// The same for this process on `device`, from its environment now and cudaDevAttrMpsEnabled. The driver
// reads the variable when CUDA starts, so a value set later is not the one in force.
work_queue_count work_queues_of_process(int device);

}  // namespace shoal::detail
