/* Rank 0 broadcasts [1, 2, 3]; every rank prints what it holds after.
 *
 *   cc-run -n 2 -- ./broadcast
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
  int rank = 0;
  cc_comm_rank(comm, &rank);

  float data[3] = {0, 0, 0};
  if (rank == 0) {
    data[0] = 1;
    data[1] = 2;
    data[2] = 3;
  }
  float* dev = NULL;
  if (cudaMalloc((void**)&dev, sizeof data) != cudaSuccess ||
      cudaMemcpy(dev, data, sizeof data, cudaMemcpyHostToDevice) != cudaSuccess) {
    fprintf(stderr, "rank %d: CUDA allocation or copy failed\n", rank);
    return 1;
  }
  r = cc_broadcast(dev, dev, 3, CC_FLOAT32, 0, comm, NULL);
  if (r != CC_SUCCESS) return cc_failed("cc_broadcast", r);
  if (cudaMemcpy(data, dev, sizeof data, cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "rank %d: copying the result back failed\n", rank);
    return 1;
  }
  printf("rank %d: [%.1f, %.1f, %.1f]\n", rank, data[0], data[1], data[2]);

  cudaFree(dev);
  r = cc_comm_destroy(comm);
  if (r != CC_SUCCESS) return cc_failed("cc_comm_destroy", r);
  return data[0] == 1 && data[1] == 2 && data[2] == 3 ? 0 : 1;
}
