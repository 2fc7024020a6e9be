// cc, NCCL and CUDA versions, the GPUs and the links between them. NVLink
// counts come from NVML when libnvidia-ml is present (loaded at run time).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <string>

#include "cc/cc.h"
#include "lib/core/nccl_symbol.hpp"
#include "lib/launch/gpu_uuid.hpp"
#include "lib/launch/nccl_bootstrap.hpp"
#include "tools/cc-doctor/doctor_report.hpp"

namespace cc::tools::doctor {
namespace {

std::string version_text(int code, int major_div, int minor_div, int minor_mod) {
  return std::to_string(code / major_div) + "." + std::to_string((code / minor_div) % minor_mod) +
         "." + std::to_string(code % minor_div);
}

std::string uuid_text(const cudaUUID_t& u) {
  return launch::format_gpu_uuid(reinterpret_cast<const unsigned char*>(u.bytes));
}

// The few NVML entry points used, declared here so no nvml.h is needed.
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr unsigned kNvmlMaxLinks = 18;

class Nvml {
 public:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    init_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlShutdown"));
    by_bus_ = reinterpret_cast<int (*)(const char*, NvmlDevice*)>(
        dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    link_state_ = reinterpret_cast<int (*)(NvmlDevice, unsigned, int*)>(
        dlsym(lib_, "nvmlDeviceGetNvLinkState"));
    remote_pci_ = reinterpret_cast<int (*)(NvmlDevice, unsigned, NvmlPciInfo*)>(
        dlsym(lib_, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
    ok_ = init_ && shutdown_ && by_bus_ && link_state_ && init_() == kNvmlSuccess;
  }
  ~Nvml() {
    if (ok_) shutdown_();
    if (lib_ != nullptr) dlclose(lib_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  bool ok() const { return ok_; }

  // Active NVLinks of gpu, grouped by the GPU (or switch, -1) at the far end.
  void links(Gpu* gpu, const std::vector<Gpu>& all) {
    NvmlDevice dev = nullptr;
    if (by_bus_(gpu->pci_bus_id.c_str(), &dev) != kNvmlSuccess) return;
    gpu->nvlinks_active = 0;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      int active = 0;
      if (link_state_(dev, link, &active) != kNvmlSuccess || active == 0) continue;
      ++gpu->nvlinks_active;
      int peer = -1;
      NvmlPciInfo pci{};
      if (remote_pci_ && remote_pci_(dev, link, &pci) == kNvmlSuccess) {
        for (const auto& other : all)
          if (static_cast<unsigned>(other.pci_domain) == pci.domain &&
              static_cast<unsigned>(other.pci_bus) == pci.bus &&
              static_cast<unsigned>(other.pci_device) == pci.device)
            peer = other.index;
      }
      bool counted = false;
      for (auto& [p, n] : gpu->nvlinks_to)
        if (p == peer) {
          ++n;
          counted = true;
        }
      if (!counted) gpu->nvlinks_to.emplace_back(peer, 1);
    }
  }

 private:
  void* lib_ = nullptr;
  bool ok_ = false;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*by_bus_)(const char*, NvmlDevice*) = nullptr;
  int (*link_state_)(NvmlDevice, unsigned, int*) = nullptr;
  int (*remote_pci_)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
};

}  // namespace

void collect_gpu(Report* r) {
  r->cc_version_code = cc_version();
  r->cc_version = version_text(r->cc_version_code, 10000, 100, 100);
  if (r->cc_version_code != CC_VERSION_CODE) {
    r->add("cc", Level::warn,
           "libcc reports version " + r->cc_version +
               " but cc-doctor was built with " CC_VERSION_STRING,
           "install cc-doctor and libcc from one build, or fix LD_LIBRARY_PATH");
  }

  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    r->nccl_version_code = nccl;
    r->nccl_version = version_text(nccl, 10000, 100, 100);
    const bool has_set_encryption = core::nccl_symbol("ncclSetEncryption") != nullptr;
    r->add("nccl", Level::info, launch::nccl_bootstrap_tls_line(nccl, has_set_encryption), "");
  } else {
    r->add("nccl", Level::error, "ncclGetVersion failed",
           "reinstall NCCL (libnccl2) or fix LD_LIBRARY_PATH");
  }

  cudaRuntimeGetVersion(&r->cuda_runtime);
  if (cudaDriverGetVersion(&r->cuda_driver) != cudaSuccess) r->cuda_driver = 0;
  if (r->cuda_driver == 0) {
    r->add("cuda", Level::warn, "no NVIDIA driver found (libcuda.so.1 not loadable)",
           "install the NVIDIA driver; in Docker run with --gpus all (NVIDIA Container Toolkit)");
  } else if (r->cuda_driver < r->cuda_runtime) {
    r->add("cuda", Level::error,
           "the driver supports CUDA " + cuda_version_text(r->cuda_driver) +
               " but cc was built with CUDA " + cuda_version_text(r->cuda_runtime),
           "update the NVIDIA driver, or build cc with an older CUDA toolkit");
  }

  cudaError_t e = cudaGetDeviceCount(&r->device_count);
  if (e != cudaSuccess || r->device_count == 0) {
    r->device_count = 0;
    std::string why = e == cudaSuccess ? "no devices" : cudaGetErrorString(e);
    r->add("gpus", Level::warn, "no CUDA device visible (" + why + ")",
           "check nvidia-smi, CUDA_VISIBLE_DEVICES, and in Docker --gpus all");
    cudaGetLastError();
    return;
  }
  for (int i = 0; i < r->device_count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    char bus[32] = {};
    const bool has_bus = cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess;
    r->gpus.push_back({.index = i,
                       .name = p.name,
                       .uuid = uuid_text(p.uuid),
                       .pci_bus_id = has_bus ? bus : "",
                       .pci_domain = p.pciDomainID,
                       .pci_bus = p.pciBusID,
                       .pci_device = p.pciDeviceID,
                       .memory_bytes = p.totalGlobalMem,
                       .cc_major = p.major,
                       .cc_minor = p.minor});
  }
  for (auto& g : r->gpus) {
    for (const auto& other : r->gpus) {
      int can = 0;
      if (other.index != g.index &&
          cudaDeviceCanAccessPeer(&can, g.index, other.index) == cudaSuccess && can != 0)
        g.p2p_peers.push_back(other.index);
    }
  }
  if (r->gpus.size() > 1) {
    for (const auto& g : r->gpus)
      if (g.p2p_peers.empty())
        r->add("gpus", Level::warn,
               "GPU " + std::to_string(g.index) +
                   " has no peer-to-peer access to the other GPUs; "
                   "NCCL will copy through host memory",
               "check the PCIe topology (nvidia-smi topo -m) and that IOMMU/ACS is off for P2P");
  }
  Nvml nvml;
  r->nvml = nvml.ok();
  if (r->nvml)
    for (auto& g : r->gpus) nvml.links(&g, r->gpus);
  cudaGetLastError();
}

}  // namespace cc::tools::doctor
