// Many ranks on one GPU, for testing a multi-rank program where there are
// fewer GPUs than ranks (CC_SHARE_GPU=1; `cc-run --share-gpu` sets it). NCCL
// refuses two ranks of one communicator on one GPU of one host, so each
// process becomes a host of its own to NCCL (NCCL_HOSTID), and NCCL then
// talks over its sockets (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE). cc's
// all-reduce kernels stay off (lib/launch/config.cpp). Everything but speed
// behaves as on separate hosts; timings mean nothing.
#pragma once

#include <cstdint>
#include <string>

namespace cc::launch {

// The NCCL host identity of one process sharing a GPU: `host`, then what
// tells it apart from the other processes of that host ("rank3", "pid77").
std::string shared_gpu_host_id(const std::string& host, const std::string& apart);

// Puts NCCL_HOSTID, NCCL_P2P_DISABLE and NCCL_SHM_DISABLE into this
// process's environment, before NCCL first reads them; a variable already
// set (by cc-run --share-gpu, or by the user) stays as it is.
void prepare_shared_gpu(const std::string& host, uint32_t pid);

}  // namespace cc::launch
