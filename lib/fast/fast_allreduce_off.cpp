// The small-message all-reduce in a build without its kernel (no nvcc, or an
// NCCL without nccl_device.h): every all-reduce goes to ncclAllReduce.
#include "lib/fast/fast_allreduce.hpp"

namespace cc::fast {

struct Channel {};

bool locally_possible(int, int, std::string* why) {
  *why = "this libcc was built without it (no nvcc, or NCCL older than 2.28)";
  return false;
}
Channel* create(ncclComm_t, int, std::string* why) {
  *why = "not built";
  return nullptr;
}
cudaError_t clear_inbox(Channel*, cudaStream_t) { return cudaErrorNotSupported; }
void destroy(Channel* ch) { delete ch; }
bool drain(Channel*, long long) { return true; }
void launched(Channel*, cudaStream_t, bool, cudaEvent_t) {}
void request_abort(Channel*) {}
bool takes(size_t, ncclDataType_t, ncclRedOp_t) { return false; }
cudaError_t allreduce(Channel*, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                      cudaStream_t, bool) {
  return cudaErrorNotSupported;
}

}  // namespace cc::fast
