#include "transport/topology.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "base/log.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

// --- NVML, loaded at run time. shoal never links it: a machine without the driver must still load libshoal.
// Only the few entry points and types used here are declared, with NVML's own ABI (C calling convention,
// nvmlReturn_t as int, 0 = success).
using nvml_return = int;
using nvml_device = struct nvml_device_opaque*;
struct nvml_pci_info {  // nvmlPciInfo_t as the *_v2 and later entry points fill it
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};
constexpr nvml_return kNvmlSuccess = 0;
constexpr int kNvmlDeviceTypeSwitch = 2;    // nvmlIntNvLinkDeviceType_t (0 is a GPU)
constexpr unsigned kMaxNvlinksPerGpu = 32;  // above any GPU's link count so far; NVML rejects ids past the last

using nvml_init_fn = nvml_return (*)();
using nvml_shutdown_fn = nvml_return (*)();
using nvml_error_string_fn = const char* (*)(nvml_return);
using nvml_handle_by_bus_id_fn = nvml_return (*)(const char*, nvml_device*);
using nvml_nvlink_state_fn = nvml_return (*)(nvml_device, unsigned, int*);
using nvml_nvlink_remote_pci_fn = nvml_return (*)(nvml_device, unsigned, nvml_pci_info*);
using nvml_nvlink_remote_type_fn = nvml_return (*)(nvml_device, unsigned, int*);

// An initialized NVML session, or the reason there is none. Shut down and unloaded on destruction.
class nvml_session {
 public:
  nvml_session() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) {
      status_ = "NVML not available (libnvidia-ml.so.1 not found)";
      return;
    }
    auto init = sym<nvml_init_fn>("nvmlInit_v2");
    shutdown_ = sym<nvml_shutdown_fn>("nvmlShutdown");
    error_string_ = sym<nvml_error_string_fn>("nvmlErrorString");
    handle_by_bus_id_ = sym<nvml_handle_by_bus_id_fn>("nvmlDeviceGetHandleByPciBusId_v2");
    nvlink_state_ = sym<nvml_nvlink_state_fn>("nvmlDeviceGetNvLinkState");
    remote_pci_ = sym<nvml_nvlink_remote_pci_fn>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
    remote_type_ = sym<nvml_nvlink_remote_type_fn>("nvmlDeviceGetNvLinkRemoteDeviceType");  // optional
    if (!init || !shutdown_ || !handle_by_bus_id_ || !nvlink_state_ || !remote_pci_) {
      status_ = "NVML too old (an NVLink query entry point is missing)";
      return;
    }
    if (nvml_return rc = init(); rc != kNvmlSuccess) {
      status_ = fmt::format("NVML failed to initialize: {}", error_string(rc));
      shutdown_ = nullptr;
      return;
    }
    status_ = "ok";
  }
  ~nvml_session() {
    if (shutdown_ != nullptr && ok()) shutdown_();
    if (lib_ != nullptr) dlclose(lib_);
  }
  nvml_session(const nvml_session&) = delete;
  nvml_session& operator=(const nvml_session&) = delete;

  bool ok() const noexcept { return status_ == "ok"; }
  const std::string& status() const noexcept { return status_; }

  std::string error_string(nvml_return rc) const {
    const char* text = error_string_ != nullptr ? error_string_(rc) : nullptr;
    return text != nullptr ? std::string(text) : fmt::format("NVML error {}", rc);
  }

  nvml_handle_by_bus_id_fn handle_by_bus_id_ = nullptr;
  nvml_nvlink_state_fn nvlink_state_ = nullptr;
  nvml_nvlink_remote_pci_fn remote_pci_ = nullptr;
  nvml_nvlink_remote_type_fn remote_type_ = nullptr;

 private:
  template <typename Fn>
  Fn sym(const char* name) {
    return reinterpret_cast<Fn>(dlsym(lib_, name));
  }

  void* lib_ = nullptr;
  nvml_shutdown_fn shutdown_ = nullptr;
  nvml_error_string_fn error_string_ = nullptr;
  std::string status_;
};

struct pci_address {
  unsigned domain = 0, bus = 0, device = 0;
  bool operator==(const pci_address&) const = default;
};

// Fills links[].nvlinks from NVML; leaves them at -1 (unknown) if NVML cannot tell. A GPU's link either ends
// at another GPU (a direct link to that one) or at an NVSwitch (a link to every GPU on the fabric).
void count_nvlinks(const std::vector<gpu_info>& gpus, const std::vector<pci_address>& addresses,
                   std::vector<gpu_link>& links, std::string& status) {
  nvml_session nvml;
  status = nvml.status();
  if (!nvml.ok()) return;
  const size_t n = gpus.size();
  std::vector<int> direct(n * n, 0);
  std::vector<int> switch_links(n, 0);
  for (size_t i = 0; i < n; ++i) {
    nvml_device dev = nullptr;
    if (nvml_return rc = nvml.handle_by_bus_id_(gpus[i].pci_bus_id.c_str(), &dev); rc != kNvmlSuccess) {
      status = fmt::format("NVML does not know GPU {} ({}): {}", i, gpus[i].pci_bus_id, nvml.error_string(rc));
      return;
    }
    for (unsigned l = 0; l < kMaxNvlinksPerGpu; ++l) {
      int active = 0;
      if (nvml.nvlink_state_(dev, l, &active) != kNvmlSuccess || active == 0) continue;
      int remote_type = -1;
      if (nvml.remote_type_ != nullptr && nvml.remote_type_(dev, l, &remote_type) != kNvmlSuccess) remote_type = -1;
      nvml_pci_info pci{};
      int peer = -1;
      if (remote_type != kNvmlDeviceTypeSwitch && nvml.remote_pci_(dev, l, &pci) == kNvmlSuccess) {
        auto it = std::find(addresses.begin(), addresses.end(), pci_address{pci.domain, pci.bus, pci.device});
        if (it != addresses.end()) peer = static_cast<int>(it - addresses.begin());
      }
      if (peer >= 0)
        ++direct[i * n + peer];
      else if (remote_type == kNvmlDeviceTypeSwitch || remote_type == -1)
        ++switch_links[i];
      // else: a GPU this process does not see (CUDA_VISIBLE_DEVICES) or another kind of endpoint.
    }
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (i != j) links[i * n + j].nvlinks = direct[i * n + j] + std::min(switch_links[i], switch_links[j]);
}

std::string cuda_error_text(cudaError_t rc) {
  return fmt::format("{} ({})", cudaGetErrorString(rc), cudaGetErrorName(rc));
}

void check_cuda(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) throw error(errc::cuda, call, cuda_error_text(rc));
}

// Why cudaGetDeviceCount found nothing, in words a user can act on.
std::string no_gpu_reason(cudaError_t rc) {
  if (rc == cudaErrorInsufficientDriver) {
    // The static runtime says "insufficient driver" also when there is no driver at all; tell them apart.
    if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
      dlclose(driver);
      return fmt::format("the NVIDIA driver is too old for this build's CUDA runtime {}.{}", CUDART_VERSION / 1000,
                         CUDART_VERSION % 1000 / 10);
    }
    return "no NVIDIA driver (libcuda.so.1 not found)";
  }
  if (rc == cudaErrorNoDevice || rc == cudaSuccess) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (visible != nullptr) return fmt::format("no CUDA device visible (CUDA_VISIBLE_DEVICES='{}')", visible);
    return "no CUDA device found";
  }
  return fmt::format("cudaGetDeviceCount failed: {}", cuda_error_text(rc));
}

}  // namespace

link_kind gpu_link::kind() const noexcept {
  if (from == to) return link_kind::self;
  if (!peer_access) return link_kind::none;
  if (nvlinks > 0) return link_kind::nvlink;
  if (nvlinks == 0) return link_kind::pcie;
  return link_kind::p2p;
}

const gpu_link& topology::link(int from, int to) const {
  const int n = static_cast<int>(gpus.size());
  if (from < 0 || from >= n || to < 0 || to >= n)
    throw error(errc::invalid_argument, "topology::link",
                fmt::format("devices {} and {}: this host has {} GPU(s)", from, to, n));
  return links[static_cast<size_t>(from) * gpus.size() + static_cast<size_t>(to)];
}

topology discover_topology() {
  topology topo;
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count <= 0) {
    topo.no_gpu_reason = no_gpu_reason(rc);
    topo.nvml_status = "not queried (no GPU)";
    (void)cudaGetLastError();  // do not leave the failure behind for the next runtime call to report
    SHOAL_LOG_DEBUG(transport, "topology: no GPU: {}", topo.no_gpu_reason);
    return topo;
  }

  std::vector<pci_address> addresses;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
    char bus_id[32] = {};
    check_cuda(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, d), "cudaDeviceGetPCIBusId");
    topo.gpus.push_back(gpu_info{.device = d,
                                 .name = prop.name,
                                 .pci_bus_id = bus_id,
                                 .sm_count = prop.multiProcessorCount,
                                 .memory_bytes = prop.totalGlobalMem,
                                 .cc_major = prop.major,
                                 .cc_minor = prop.minor});
    addresses.push_back(pci_address{static_cast<unsigned>(prop.pciDomainID), static_cast<unsigned>(prop.pciBusID),
                                    static_cast<unsigned>(prop.pciDeviceID)});
  }

  for (int from = 0; from < count; ++from) {
    for (int to = 0; to < count; ++to) {
      gpu_link link{.from = from, .to = to};
      if (from == to) {
        link.peer_access = true;
      } else {
        int can = 0;
        check_cuda(cudaDeviceCanAccessPeer(&can, from, to), "cudaDeviceCanAccessPeer");
        link.peer_access = can != 0;
        if (link.peer_access) {
          int value = 0;
          if (cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrPerformanceRank, from, to) == cudaSuccess)
            link.performance_rank = value;
          if (cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrNativeAtomicSupported, from, to) == cudaSuccess)
            link.native_atomics = value != 0;
          (void)cudaGetLastError();
        }
      }
      topo.links.push_back(link);
    }
  }

  if (count > 1) {
    count_nvlinks(topo.gpus, addresses, topo.links, topo.nvml_status);
  } else {
    topo.nvml_status = "not queried (one GPU)";
  }
  SHOAL_LOG_DEBUG(transport, "topology: {} GPU(s); NVLink counts: {}", count, topo.nvml_status);
  return topo;
}

std::string link_label(const gpu_link& link) {
  switch (link.kind()) {
    case link_kind::self:
      return "X";
    case link_kind::none:
      return "none";
    case link_kind::nvlink:
      return fmt::format("NV{}", link.nvlinks);
    case link_kind::pcie:
      return "PCIe-P2P";
    case link_kind::p2p:
      return "P2P";
  }
  return "?";
}

std::string_view to_string(transport_kind kind) noexcept {
  switch (kind) {
    case transport_kind::p2p:
      return "p2p";
    case transport_kind::proxy:
      return "proxy";
  }
  return "?";
}

std::string_view describe(transport_kind kind) noexcept {
  switch (kind) {
    case transport_kind::p2p:
      return "loads and stores through a peer mapping of the symmetric heap (NVLink or PCIe)";
    case transport_kind::proxy:
      return "network operations issued by the PE's host proxy thread over UCX (see the Network line)";
  }
  return "?";
}

transport_kind select_transport(bool same_node, bool peer_access) noexcept {
  return same_node && peer_access ? transport_kind::p2p : transport_kind::proxy;
}

transport_kind select_transport(const pe_site& a, const pe_site& b, const topology& local) {
  if (a.node != b.node) return transport_kind::proxy;
  // Two PEs on one GPU map each other's heap like any peer pair; link(d, d) is self and always accessible.
  return select_transport(true, local.link(a.device, b.device).peer_access);
}

}  // namespace shoal::detail
