#include "lib/launch/share_gpu.hpp"

#include <cstdlib>

namespace cc::launch {

std::string shared_gpu_host_id(const std::string& host, const std::string& apart) {
  return host + "-" + apart;
}

void prepare_shared_gpu(const std::string& host, uint32_t pid) {
  ::setenv("NCCL_HOSTID", shared_gpu_host_id(host, "pid" + std::to_string(pid)).c_str(), 0);
  ::setenv("NCCL_P2P_DISABLE", "1", 0);
  ::setenv("NCCL_SHM_DISABLE", "1", 0);
}

}  // namespace cc::launch
