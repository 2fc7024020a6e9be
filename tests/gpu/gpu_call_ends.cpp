// One rank of the scenarios of gpu_call_ends.sh, under
// `cc-run --share-gpu -n N`: ranks whose calls differ and then end at once.
// With no GPU it says so and exits 77 (skipped).
//
//   gpu_call_ends WAY AT   200 calls, op #n an all-reduce of 1024 + n floats,
//                          enqueued without waiting for the GPU, then
//                          cc_comm_destroy. At op #AT rank 1 makes another
//                          call, by WAY: kind (an all-gather of 256 floats),
//                          count (one float more), type (float16), root
//                          (every rank broadcasts there, rank 1 from root 1,
//                          the others from root 0), skip (rank 1 leaves it
//                          out), extra (rank 1 calls a barrier first); none:
//                          no rank differs. Prints "VERDICT <call> <result>
//                          <words>" for the first call that failed (an
//                          all-reduce, once the rendezvous found the
//                          difference while the ranks ran, or
//                          cc_comm_destroy), or "VERDICT none" when none did.
#include <cstdio>
#include <string>

#include <cuda_runtime_api.h>

#include "cc/cc.h"
#include "tests/gpu/rank_program.hpp"

namespace {

using namespace cc::test;

constexpr int kCalls = 200;

cc_stream_t as_cc(cudaStream_t s) { return reinterpret_cast<cc_stream_t>(s); }

size_t count_at(int n) { return 1024 + static_cast<size_t>(n); }

// The call at op #n of rank `rank`.
cc_result_t call(const std::string& way, int at, int n, int rank, cc_comm_t comm, Buffers& b,
                 cudaStream_t s) {
  const bool odd_one = rank == 1 && n == at;
  const size_t count = count_at(n);
  if (way == "root" && n == at)
    return cc_broadcast(b.send, b.recv, count, CC_FLOAT32, odd_one ? 1 : 0, comm, as_cc(s));
  if (odd_one && way == "kind")
    return cc_allgather(b.send, b.recv, 256, CC_FLOAT32, comm, as_cc(s));
  if (odd_one && way == "count")
    return cc_allreduce(b.send, b.recv, count + 1, CC_FLOAT32, CC_SUM, comm, as_cc(s));
  if (odd_one && way == "type")
    return cc_allreduce(b.send, b.recv, count, CC_FLOAT16, CC_SUM, comm, as_cc(s));
  if (odd_one && way == "extra")
    if (const cc_result_t r = cc_barrier(comm, as_cc(s)); r != CC_SUCCESS) return r;
  return cc_allreduce(b.send, b.recv, count, CC_FLOAT32, CC_SUM, comm, as_cc(s));
}

void verdict(const char* call, cc_result_t r) {
  std::printf("VERDICT %s %s %s\n", call, cc_result_string(r), cc_last_error());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (no_cuda_device()) return 77;
  const std::string way = argc > 1 ? argv[1] : "";
  if (way == "probe") return 0;
  const int at = argc > 2 ? std::atoi(argv[2]) : 50;
  cc_comm_t comm = nullptr;
  if (cc_result_t r = cc_comm_init_from_env(&comm, nullptr); r != CC_SUCCESS)
    return fail("init: " + words(r));
  int rank = 0;
  cc_comm_rank(comm, &rank);
  cudaStream_t s = stream_on_device(comm);
  bool told = false;
  {
    Buffers b(count_at(kCalls) * 16);  // an all-gather of 256 floats over up to 16 ranks
    for (int n = 1; n <= kCalls; ++n) {
      if (way == "skip" && rank == 1 && n == at) continue;
      if (const cc_result_t r = call(way, at, n, rank, comm, b, s); r != CC_SUCCESS) {
        verdict(("op #" + std::to_string(n)).c_str(), r);
        told = true;
        break;
      }
    }
    if (const cc_result_t r = cc_comm_destroy(comm); r != CC_SUCCESS && !told) {
      verdict("cc_comm_destroy", r);
      told = true;
    }
  }
  cudaStreamDestroy(s);
  if (!told) std::printf("VERDICT none\n");
  return 0;
}
