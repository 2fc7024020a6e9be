#include "lib/launch/device.hpp"
#include "lib/launch/gpu_uuid.hpp"

#include <unistd.h>

#include <climits>
#include <cstdio>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/who.hpp"

namespace cc::launch {

Status choose_device(int rank, const std::string& host, int configured, int local_rank,
                     int* device) {
  const std::string who = cc::who(rank, host, static_cast<uint32_t>(getpid()));
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0) {
    std::string why = err != cudaSuccess ? cudaGetErrorString(err) : "0 devices";
    cudaGetLastError();  // do not leave the sticky-free error for the host program
    return make_status(CC_ERR_NO_DEVICE,
                       who + ": no CUDA device is visible (cudaGetDeviceCount: " + why +
                           "). Check nvidia-smi, CUDA_VISIBLE_DEVICES, and that the container "
                           "was started with --gpus");
  }
  if (configured >= 0) {
    if (configured >= count) {
      return make_status(
          CC_ERR_INVALID_ARGUMENT,
          who + ": device " + std::to_string(configured) +
              " (config.device or CC_DEVICE) does not exist: " + std::to_string(count) +
              " CUDA device(s) are visible, numbered 0.." + std::to_string(count - 1));
    }
    *device = configured;
  } else {
    *device = (local_rank >= 0 ? local_rank : rank) % count;
  }
  return Status::success();
}

Status describe_device(int rank, const std::string& host, int device, rv::MemberInfo* info) {
  const std::string who = cc::who(rank, host, info->pid);
  int version = 0;
  if (ncclResult_t r = ncclGetVersion(&version); r != ncclSuccess) {
    return make_status(CC_ERR_NCCL, who + ": ncclGetVersion failed: " + ncclGetErrorString(r) +
                                        ". Check which libnccl.so.2 is loaded (ldd)");
  }
  info->nccl_version = version;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  info->cuda_driver = driver;
  info->cuda_runtime = runtime;
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
    cudaGetLastError();
    return make_status(CC_ERR_CUDA, who + ": cudaGetDeviceProperties(" + std::to_string(device) +
                                        ") failed: " + cudaGetErrorString(e));
  }
  info->gpu_uuid = format_gpu_uuid(reinterpret_cast<const unsigned char*>(prop.uuid.bytes));
  return Status::success();
}

}  // namespace cc::launch
