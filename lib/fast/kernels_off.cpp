// cc's all-reduce kernels in a build without nvcc: none; every all-reduce
// goes to ncclAllReduce (locally_possible says why).
#include "lib/fast/kernels.hpp"

namespace cc::fast {

bool kernels_built() { return false; }
bool kernel_supports(ncclDataType_t, ncclRedOp_t, size_t*) { return false; }
cudaError_t load_kernels() { return cudaSuccess; }
cudaError_t launch_allreduce(Algo, int, const KernelArgs&, ncclDataType_t, ncclRedOp_t,
                             cudaStream_t) {
  return cudaErrorNotSupported;
}

}  // namespace cc::fast
