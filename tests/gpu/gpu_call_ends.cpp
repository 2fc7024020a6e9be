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
//                          no rank differs; broadcast: every rank broadcasts
//                          there from root 0 (root's control). Prints "VERDICT <call> <result>
//                          <message>" for the first call that failed (an
//                          all-reduce, once the rendezvous found the
//                          difference while the ranks ran, or
//                          cc_comm_destroy), or "VERDICT none" when none did.
//   gpu_call_ends split AT every rank splits the communicator (one color, the
//                          same order) and makes 20 all-reduces of 1024 + n
//                          floats on the child, rank 1 one float more at op
//                          #AT, then destroys the child at once: "VERDICT
//                          ..." as above for the child, then "PARENT ok" or
//                          "PARENT <result> <message>" for the parent's destroy.
//   gpu_call_ends replay WAY
//                          every rank captures two CUDA graphs, A (all-reduces
//                          of 1024 floats SUM and 2048 floats SUM) and B (the
//                          first MAX instead), and replays five times: A, A,
//                          then B (WAY same: on every rank; other: on rank 1
//                          alone, the others A), A, A. It waits for the
//                          stream, makes one barrier, destroys while the
//                          graphs live ("GRAPHS refused: <message>", or "GRAPHS
//                          not refused"), destroys the graphs and then the
//                          communicator: "VERDICT ..." as above.
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
  if ((way == "root" || way == "broadcast") && n == at)
    return cc_broadcast(b.send, b.recv, count, CC_FLOAT32, odd_one && way == "root" ? 1 : 0,
                        comm, as_cc(s));
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

// The rank's VERDICT line: the first call that failed, or none.
class Verdict {
 public:
  // Whether `r` failed; the first failure prints its VERDICT line.
  bool failed(const std::string& call, cc_result_t r) {
    if (r == CC_SUCCESS) return false;
    if (!told_) {
      std::printf("VERDICT %s %s %s\n", call.c_str(), cc_result_string(r), cc_last_error());
      std::fflush(stdout);
      told_ = true;
    }
    return true;
  }
  // "VERDICT none" when no call failed.
  void end() const {
    if (!told_) std::printf("VERDICT none\n");
  }

 private:
  bool told_ = false;
};

// A split child whose rank 1 differs at op #at of its 20 calls, destroyed
// at once; then the parent, whose calls agree.
int split_child(int at, cc_comm_t comm, int rank, cudaStream_t s) {
  cc_comm_t child = nullptr;
  if (const cc_result_t r = cc_comm_split(comm, 0, rank, &child, nullptr); r != CC_SUCCESS)
    return fail("cc_comm_split: " + words(r));
  Verdict verdict;
  {
    Buffers b(count_at(20) + 1);
    for (int n = 1; n <= 20; ++n) {
      const size_t count = count_at(n) + (rank == 1 && n == at ? 1 : 0);
      if (verdict.failed("op #" + std::to_string(n),
                         cc_allreduce(b.send, b.recv, count, CC_FLOAT32, CC_SUM, child, as_cc(s))))
        break;
    }
    // A difference found while the child ran fails it before its destroy.
    verdict.failed("cc_comm_check", cc_comm_check(child));
    verdict.failed("cc_comm_destroy", cc_comm_destroy(child));
    wait_stream(s, std::chrono::seconds(60));
  }
  verdict.end();
  const cc_result_t r = cc_comm_destroy(comm);
  std::printf("PARENT %s\n", r == CC_SUCCESS ? "ok" : words(r).c_str());
  return 0;
}

// Captures `first` and an all-reduce of 2048 floats SUM into a graph.
bool capture(cc_comm_t comm, cc_redop_t first, Buffers& b, cudaStream_t s, cudaGraph_t* graph,
             cudaGraphExec_t* exec) {
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return false;
  const cc_result_t r1 = cc_allreduce(b.send, b.recv, 1024, CC_FLOAT32, first, comm, as_cc(s));
  const cc_result_t r2 = cc_allreduce(b.send, b.recv, 2048, CC_FLOAT32, CC_SUM, comm, as_cc(s));
  if (cudaStreamEndCapture(s, graph) != cudaSuccess || r1 != CC_SUCCESS || r2 != CC_SUCCESS)
    return false;
  return cudaGraphInstantiate(exec, *graph, 0) == cudaSuccess;
}

// Two graphs, replayed five times; with `other`, rank 1 replays B where the
// others replay A (replay #3).
int replays(const std::string& way, cc_comm_t comm, int rank, cudaStream_t s) {
  Buffers b(4096);
  // NCCL's connections are made outside the capture.
  if (const cc_result_t r = cc_allreduce(b.send, b.recv, 1024, CC_FLOAT32, CC_SUM, comm, as_cc(s));
      r != CC_SUCCESS)
    return fail("warm-up: " + words(r));
  wait_stream(s, std::chrono::seconds(60));
  cudaGraph_t graph_a = nullptr, graph_b = nullptr;
  cudaGraphExec_t a = nullptr, b_exec = nullptr;
  if (!capture(comm, CC_SUM, b, s, &graph_a, &a) || !capture(comm, CC_MAX, b, s, &graph_b, &b_exec))
    return fail("capturing the graphs: " + std::string(cc_last_error()));
  for (int i = 1; i <= 5; ++i) {
    const bool use_b = i == 3 && (way == "same" || rank == 1);
    if (cudaGraphLaunch(use_b ? b_exec : a, s) != cudaSuccess) return fail("cudaGraphLaunch");
  }
  wait_stream(s, std::chrono::seconds(60));  // every replay counted before destroy
  Verdict verdict;
  verdict.failed("cc_barrier", cc_barrier(comm, as_cc(s)));
  wait_stream(s, std::chrono::seconds(60));
  // NCCL lets go of a communicator only once the graphs that captured its
  // calls are gone: cc_comm_destroy refuses while they live (a second's
  // wait), and the communicator stays as it was.
  if (const cc_result_t r = cc_comm_destroy(comm); r != CC_ERR_INVALID_USAGE) {
    std::printf("GRAPHS not refused: %s\n", cc_result_string(r));
    verdict.failed("cc_comm_destroy", r);
    return 0;  // destroyed: the graphs go with the process
  }
  std::printf("GRAPHS refused: %s\n", cc_last_error());
  cudaGraphExecDestroy(a);
  cudaGraphExecDestroy(b_exec);
  cudaGraphDestroy(graph_a);
  cudaGraphDestroy(graph_b);
  verdict.failed("cc_comm_destroy", cc_comm_destroy(comm));
  verdict.end();
  return 0;
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
  if (way == "split" || way == "replay") {
    const int rc = way == "split" ? split_child(at, comm, rank, s)
                                  : replays(argc > 2 ? argv[2] : "", comm, rank, s);
    std::fflush(stdout);
    cudaStreamDestroy(s);
    return rc;
  }
  Verdict verdict;
  {
    Buffers b(count_at(kCalls) * 16);  // an all-gather of 256 floats over up to 16 ranks
    for (int n = 1; n <= kCalls; ++n) {
      if (way == "skip" && rank == 1 && n == at) continue;
      if (verdict.failed("op #" + std::to_string(n), call(way, at, n, rank, comm, b, s))) break;
    }
    verdict.failed("cc_comm_destroy", cc_comm_destroy(comm));
  }
  cudaStreamDestroy(s);
  verdict.end();
  return 0;
}
