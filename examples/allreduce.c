/* Every rank contributes rank + 1 to an all-reduce and prints the value
 * before and after: with 2 ranks every rank prints 3.0.
 *
 *   cc-run -n 2 -- ./allreduce
 */
#include <stdio.h>

#include "examples/example_util.h"

int main(void) {
  cc_comm_t comm = NULL;
  int rank = 0, nranks = 0;
  if (example_join(&comm, &rank, &nranks) != 0) return 1;

  float value = (float)(rank + 1);
  float* dev = example_to_device(&value, sizeof value, rank);
  if (dev == NULL) return 1;
  printf("rank %d of %d: before all-reduce: %.1f\n", rank, nranks, value);

  cc_result_t r =
      cc_allreduce(dev, dev, 1, CC_FLOAT32, CC_SUM, comm, NULL); /* in place, default stream */
  if (r != CC_SUCCESS) return cc_failed("cc_allreduce", r);
  if (example_from_device(&value, dev, sizeof value, rank) != 0) return 1;
  printf("rank %d of %d: after all-reduce: %.1f\n", rank, nranks, value);

  cudaFree(dev);
  r = cc_comm_destroy(comm);
  if (r != CC_SUCCESS) return cc_failed("cc_comm_destroy", r);
  return value == (float)(nranks * (nranks + 1) / 2) ? 0 : 1;
}
