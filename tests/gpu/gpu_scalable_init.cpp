// One rank of gpu_scalable_init.sh, under `cc-run --share-gpu -n N`: makes
// the communicator (from one NCCL id or several, as CC_NCCL_RANKS_PER_ID
// has it), then checks an all-reduce and an all-gather of values every rank
// can compute. Prints "OK values <ranks> <checksum>", or "FAIL <why>". With
// no GPU it says so and exits 77 (skipped).
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "cc/cc.h"
#include "tests/gpu/rank_program.hpp"

namespace {

using namespace cc::test;

constexpr size_t kCount = 1 << 16;

cc_stream_t as_cc(cudaStream_t s) { return reinterpret_cast<cc_stream_t>(s); }

float sent_by(int rank, size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1));
}

int values(cc_comm_t comm, int rank, cudaStream_t s) {
  int n = 0;
  cc_comm_size(comm, &n);
  std::vector<float> host(kCount);
  for (size_t i = 0; i < kCount; ++i) host[i] = sent_by(rank, i);
  Buffers b(kCount * static_cast<size_t>(n));
  cudaMemcpy(b.send, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice);
  if (cc_result_t r = cc_allreduce(b.send, b.recv, kCount, CC_FLOAT32, CC_SUM, comm, as_cc(s));
      r != CC_SUCCESS)
    return fail("cc_allreduce: " + words(r));
  if (!wait_stream(s, std::chrono::seconds(60))) return fail("cc_allreduce did not finish in 60 s");
  std::vector<float> got(kCount);
  cudaMemcpy(got.data(), b.recv, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  double checksum = 0;
  for (size_t i = 0; i < kCount; ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 13 + 1));
    if (got[i] != want)
      return fail("all-reduce element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                  ", not " + std::to_string(want));
    checksum += got[i];
  }
  if (cc_result_t r = cc_allgather(b.send, b.recv, kCount, CC_FLOAT32, comm, as_cc(s));
      r != CC_SUCCESS)
    return fail("cc_allgather: " + words(r));
  if (!wait_stream(s, std::chrono::seconds(60))) return fail("cc_allgather did not finish in 60 s");
  std::vector<float> all(kCount * static_cast<size_t>(n));
  cudaMemcpy(all.data(), b.recv, all.size() * sizeof(float), cudaMemcpyDeviceToHost);
  for (int from = 0; from < n; ++from)
    for (size_t i = 0; i < kCount; i += 997)
      if (all[static_cast<size_t>(from) * kCount + i] != sent_by(from, i))
        return fail("all-gather: rank " + std::to_string(from) + "'s element " + std::to_string(i) +
                    " is wrong");
  std::printf("OK values %d %.0f\n", n, checksum);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run_rank_program(argc > 1 ? argv[1] : "", {{"values", values}});
}
