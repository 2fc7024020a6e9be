/* What the examples share: joining the job from the environment, reporting a
 * failed cc call with cc_last_error(), and moving a small buffer to and from
 * the GPU. C and C++ (the CUDA examples include it too). */
#ifndef CC_EXAMPLE_UTIL_H
#define CC_EXAMPLE_UTIL_H

#include <stddef.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "cc/cc.h"

/* Prints which call failed, its result and cc_last_error(); returns 1, the
 * exit status. */
static inline int cc_failed(const char* what, cc_result_t r) {
  fprintf(stderr, "%s: %s\n  %s\n", what, cc_result_string(r), cc_last_error());
  return 1;
}

/* cc_comm_init_from_env, then this rank and the number of ranks (nranks may
 * be NULL). Returns 0, or 1 with the failure printed. */
static inline int example_join(cc_comm_t* comm, int* rank, int* nranks) {
  *comm = NULL;
  cc_result_t r = cc_comm_init_from_env(comm, NULL);
  if (r != CC_SUCCESS) return cc_failed("cc_comm_init_from_env", r);
  cc_comm_rank(*comm, rank);
  if (nranks) cc_comm_size(*comm, nranks);
  return 0;
}

/* A device buffer holding a copy of host's bytes; NULL with the failure
 * printed. */
static inline float* example_to_device(const float* host, size_t bytes, int rank) {
  float* dev = NULL;
  if (cudaMalloc((void**)&dev, bytes) != cudaSuccess ||
      cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    fprintf(stderr, "rank %d: CUDA allocation or copy failed\n", rank);
    return NULL;
  }
  return dev;
}

/* Copies the device buffer back into host; 0, or 1 with the failure printed. */
static inline int example_from_device(float* host, const float* dev, size_t bytes, int rank) {
  if (cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "rank %d: copying the result back failed\n", rank);
    return 1;
  }
  return 0;
}

#endif /* CC_EXAMPLE_UTIL_H */
