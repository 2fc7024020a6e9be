/* Rank 0 broadcasts [1, 2, 3]; every rank prints what it holds after.
 *
 *   cc-run -n 2 -- ./broadcast
 */
#include <stdio.h>

#include "examples/example_util.h"

int main(void) {
  cc_comm_t comm = NULL;
  int rank = 0;
  if (example_join(&comm, &rank, NULL) != 0) return 1;

  float data[3] = {0, 0, 0};
  if (rank == 0) {
    data[0] = 1;
    data[1] = 2;
    data[2] = 3;
  }
  float* dev = example_to_device(data, sizeof data, rank);
  if (dev == NULL) return 1;
  cc_result_t r = cc_broadcast(dev, dev, 3, CC_FLOAT32, 0, comm, NULL);
  if (r != CC_SUCCESS) return cc_failed("cc_broadcast", r);
  if (example_from_device(data, dev, sizeof data, rank) != 0) return 1;
  printf("rank %d: [%.1f, %.1f, %.1f]\n", rank, data[0], data[1], data[2]);

  cudaFree(dev);
  r = cc_comm_destroy(comm);
  if (r != CC_SUCCESS) return cc_failed("cc_comm_destroy", r);
  return data[0] == 1 && data[1] == 2 && data[2] == 3 ? 0 : 1;
}
