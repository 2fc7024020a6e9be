// Choosing the CUDA device of a rank and describing it for the rendezvous.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.hpp"
#include "lib/launch/host_name.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::launch {

// The device a rank uses: `configured` (config.device / CC_DEVICE) when >= 0,
// else local_rank % count (rank % count when local_rank < 0). No visible
// device is CC_ERR_NO_DEVICE at once, saying what to check.
Status choose_device(int rank, const std::string& host, int configured, int local_rank,
                     int* device);

// Fills nccl_version, cuda_driver, cuda_runtime and gpu_uuid of `info` for
// `device` (which must be current).
Status describe_device(int rank, const std::string& host, int device, rv::MemberInfo* info);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L prints it.

}  // namespace cc::launch
