// What this host's GPUs are and how each pair is linked, and which transport serves a pair of PEs.
// Discovery asks the CUDA runtime (and NVML, when the driver provides it, for NVLink counts). A machine
// with no driver or no GPU is a normal answer (zero GPUs and the reason), never an exception, so anything
// that only reports (shoal-info, logs) can call it anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shoal::detail {

struct gpu_info {
  int device = -1;         // CUDA ordinal in this process (after CUDA_VISIBLE_DEVICES)
  std::string name;        // e.g. "NVIDIA H200"
  std::string pci_bus_id;  // "dddd:bb:dd.f", as cudaDeviceGetPCIBusId writes it
  int sm_count = 0;
  std::uint64_t memory_bytes = 0;
  int cc_major = 0;  // compute capability, e.g. 9.0 for Hopper
  int cc_minor = 0;
};

// How one GPU reaches another's memory with loads and stores.
enum class link_kind {
  self,    // the same GPU
  none,    // no peer access: a PE on `to` is not load/store reachable from `from`
  nvlink,  // peer access over NVLink (direct or through NVSwitch)
  pcie,    // peer access, and NVML says there is no NVLink between them
  p2p,     // peer access, link type unknown (NVML absent)
};

// The ordered pair (from, to): what `from` can do with `to`'s memory.
struct gpu_link {
  int from = -1;
  int to = -1;
  bool peer_access = false;     // cudaDeviceCanAccessPeer(from, to)
  int performance_rank = -1;    // cudaDevP2PAttrPerformanceRank: lower is faster; -1 unknown or no access
  bool native_atomics = false;  // cudaDevP2PAttrNativeAtomicSupported
  int nvlinks = -1;             // active NVLinks joining the two (via NVSwitch: the fewer of the two GPUs'
                                // switch links); 0 none; -1 unknown (NVML absent or failed)

  link_kind kind() const noexcept;
};

struct topology {
  std::vector<gpu_info> gpus;   // empty when no GPU is usable; no_gpu_reason then says why
  std::vector<gpu_link> links;  // gpus.size()^2 entries, row-major by `from`
  std::string no_gpu_reason;    // e.g. "no NVIDIA driver (libnvidia... not found)"
  std::string nvml_status;      // "ok", or why NVLink counts are unknown

  // The link from device `from` to device `to`; both must be ordinals in `gpus`.
  const gpu_link& link(int from, int to) const;
};

// Queries the CUDA runtime and NVML of this process. Never throws for a missing driver, device or NVML;
// throws shoal::error(errc::cuda) only when a query fails on a GPU the runtime has just reported.
topology discover_topology();

// "NV<k>", "PCIe-P2P", "P2P", "none" or "X" (self): the label of a link in a matrix.
std::string link_label(const gpu_link& link);

// Which mechanism serves a pair of PEs. User kernels never see this; it is data the runtime acts on.
enum class transport_kind {
  p2p,    // load/store through a peer mapping (NVLink or PCIe); needs the same node and peer access
  proxy,  // network operations issued by the PE's host proxy thread over UCX (other nodes, or no peer access)
};

std::string_view to_string(transport_kind kind) noexcept;

// One line saying what the transport is (whether this build has the proxy's network: describe_ucx_network).
std::string_view describe(transport_kind kind) noexcept;

// The rule: PEs on the same node whose GPUs can map each other (or share one GPU) use p2p; every other
// pair uses the proxy. "Node" is the load/store domain, so SHOAL_EMULATE_NODES splits one host into several.
transport_kind select_transport(bool same_node, bool peer_access) noexcept;

// Where a PE runs: its node's identity and its GPU's ordinal on that node.
struct pe_site {
  std::string_view node;
  int device = -1;
};

// The rule applied to two PEs, with `local` describing the GPUs of their node when they share one.
// Throws shoal::error(errc::invalid_argument) when a same-node device is not in `local`.
transport_kind select_transport(const pe_site& a, const pe_site& b, const topology& local);

}  // namespace shoal::detail
