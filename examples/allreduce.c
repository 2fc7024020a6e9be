/* Every rank contributes rank + 1 to an all-reduce and prints the value
 * before and after: with 2 ranks every rank prints 3.0.
 *
 *   cc-run -n 2 -- ./allreduce
 */
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "cc/cc.h"

static int cc_failed(const char* what, cc_result_t r) {
  fprintf(stderr, "%s: %s\n  %s\n", what, cc_result_string(r), cc_last_error());
  return 1;
}

int main(void) {
  cc_comm_t comm = NULL;
  cc_result_t r = cc_comm_init_from_env(&comm, NULL);
  if (r != CC_SUCCESS) return cc_failed("cc_comm_init_from_env", r);
  int rank = 0, nranks = 0;
  cc_comm_rank(comm, &rank);
  cc_comm_size(comm, &nranks);

  float value = (float)(rank + 1);
  float* dev = NULL;
  if (cudaMalloc((void**)&dev, sizeof value) != cudaSuccess ||
      cudaMemcpy(dev, &value, sizeof value, cudaMemcpyHostToDevice) != cudaSuccess) {
    fprintf(stderr, "rank %d: CUDA allocation or copy failed\n", rank);
    return 1;
  }
  printf("rank %d of %d: before all-reduce: %.1f\n", rank, nranks, value);

  r = cc_allreduce(dev, dev, 1, CC_FLOAT32, CC_SUM, comm, NULL); /* in place, default stream */
  if (r != CC_SUCCESS) return cc_failed("cc_allreduce", r);
  if (cudaMemcpy(&value, dev, sizeof value, cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "rank %d: copying the result back failed\n", rank);
    return 1;
  }
  printf("rank %d of %d: after all-reduce: %.1f\n", rank, nranks, value);

  cudaFree(dev);
  r = cc_comm_destroy(comm);
  if (r != CC_SUCCESS) return cc_failed("cc_comm_destroy", r);
  return value == (float)(nranks * (nranks + 1) / 2) ? 0 : 1;
}
