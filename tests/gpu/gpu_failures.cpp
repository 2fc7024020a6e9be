// One rank of the failure scenarios, started by gpu_failures.sh
// with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (ranks by hand, so the
// script can kill one). With no GPU it says so and exits 77 (skipped).
//
//   gpu_failures kill-loop     loop large all-reduces until a call fails;
//                              prints "ERROR_AT <realtime ns> <result> <message>"
//   gpu_failures skip          20 all-reduces; rank 1 skips the 10th; rank 0
//                              prints "ERROR_AT ..." when its deadline hits
//   gpu_failures abort-threads 8 threads call cc_comm_abort 100 times each
//                              while the main thread runs all-reduces
//   gpu_failures init-missing  init a world of 2 with only this rank started
//   gpu_failures init          prints "START_AT <realtime ns>", then inits; on
//                              success one all-reduce of rank + 1 ("OK init,
//                              all-reduce N"), else "ERROR_AT <realtime ns>
//                              <result> <message>" and exit status 3 (the
//                              script judges the message)
// Every mode prints "OK <message>" on success and exits 0, else "FAIL <why>".
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "cc/cc.h"
#include "tests/gpu/rank_program.hpp"

namespace {

using namespace cc::test;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Loops all-reduces until one fails; prints when and how.
int kill_loop(cc_comm_t comm, int rank, cudaStream_t s) {
  // 64 MiB of float by default; LOOP_COUNT=256 keeps every call on cc's LL
  // kernel (4 MiB with CC_FAST_ALLREDUCE_PLAN: its one-shot or two-shot
  // kernel), whose spinning must end when the peer dies.
  const size_t count = static_cast<size_t>(env_int("LOOP_COUNT", 16 << 20));
  Buffers b(count);
  const auto until = Clock::now() + milliseconds(env_int("LOOP_MS", 60000));
  bool said = false;
  for (int i = 0; Clock::now() < until; ++i) {
    cc_result_t r = cc_allreduce(b.send, b.recv, count, CC_FLOAT32, CC_SUM, comm,
                                 reinterpret_cast<cc_stream_t>(s));
    if (r == CC_SUCCESS && !wait_stream(s, milliseconds(30000)))
      return fail("rank " + std::to_string(rank) +
                  ": the stream did not finish within 30 s of a peer's death");
    if (r == CC_SUCCESS && i >= 3) {
      // One more call tells whether the watchdog failed the communicator meanwhile.
      r = cc_allreduce(b.send, b.recv, 1, CC_FLOAT32, CC_SUM, comm,
                       reinterpret_cast<cc_stream_t>(s));
      if (r == CC_SUCCESS && !wait_stream(s, milliseconds(30000)))
        return fail("rank " + std::to_string(rank) + ": the stream did not finish");
    }
    if (r != CC_SUCCESS) {
      std::printf("ERROR_AT %lld %s %s\n", realtime_ns(), cc_result_string(r), cc_last_error());
      std::fflush(stdout);
      return r == CC_ERR_PEER_FAILED ? 0 : 1;
    }
    if (!said && i >= 3) {
      std::printf("LOOPING %d\n", rank);
      std::fflush(stdout);
      said = true;
    }
  }
  return fail("rank " + std::to_string(rank) + ": no call failed within LOOP_MS");
}

int skip(cc_comm_t comm, int rank, cudaStream_t s) {
  const size_t count = static_cast<size_t>(env_int("LOOP_COUNT", 4 << 20));
  Buffers b(count);
  for (int i = 1; i <= 20; ++i) {
    if (rank == 1 && i == 10) continue;
    const cc_result_t r = cc_allreduce(b.send, b.recv, count, CC_FLOAT32, CC_SUM, comm,
                                       reinterpret_cast<cc_stream_t>(s));
    if (r == CC_SUCCESS && wait_stream(s, milliseconds(30000))) continue;
    if (r == CC_SUCCESS) return fail("the stream did not finish within 30 s");
    std::printf("ERROR_AT %lld %s %s\n", realtime_ns(), cc_result_string(r), cc_last_error());
    std::fflush(stdout);
    return r == CC_ERR_TIMEOUT ? 0 : 1;
  }
  // The last op never completes on rank 0: its watchdog names it at the
  // deadline; one more call returns the timeout.
  if (rank == 0) {
    const cc_result_t r =
        cc_allreduce(b.send, b.recv, 1, CC_FLOAT32, CC_SUM, comm, reinterpret_cast<cc_stream_t>(s));
    std::printf("ERROR_AT %lld %s %s\n", realtime_ns(), cc_result_string(r), cc_last_error());
    std::fflush(stdout);
    return r == CC_ERR_TIMEOUT ? 0 : 1;
  }
  // Rank 1 stays until rank 0 has asked who is behind, then leaves.
  std::this_thread::sleep_for(milliseconds(env_int("CC_TIMEOUT_MS", 3000) + 4000));
  std::printf("OK rank 1 skipped op 10 and waited\n");
  return 0;
}

int abort_threads(cc_comm_t comm, int rank, cudaStream_t s) {
  const size_t count = 1u << 20;
  Buffers b(count);
  std::atomic<bool> go{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      while (!go) std::this_thread::yield();
      for (int i = 0; i < 100; ++i)
        if (cc_comm_abort(comm) != CC_SUCCESS) ++bad;
    });
  cc_result_t last = CC_SUCCESS;
  for (int i = 0; i < 200; ++i) {
    if (i == 20) go = true;
    last = cc_allreduce(b.send, b.recv, count, CC_FLOAT32, CC_SUM, comm,
                        reinterpret_cast<cc_stream_t>(s));
    if (last != CC_SUCCESS) break;
  }
  go = true;
  for (auto& t : threads) t.join();
  wait_stream(s, milliseconds(30000));
  if (bad != 0)
    return fail(std::to_string(bad.load()) + " cc_comm_abort calls did not return CC_SUCCESS");
  const cc_result_t r = cc_allreduce(b.send, b.recv, count, CC_FLOAT32, CC_SUM, comm,
                                     reinterpret_cast<cc_stream_t>(s));
  if (r != CC_ERR_ABORTED && r != CC_ERR_PEER_FAILED)
    return fail("after cc_comm_abort, cc_allreduce returned " + words(r));
  if (cc_comm_abort(comm) != CC_SUCCESS) return fail("a later cc_comm_abort failed");
  std::printf("OK rank %d: %s\n", rank, words(r).c_str());
  return 0;
}

// One all-reduce of rank + 1: the communicator a healthy init made works.
int allreduce_once(cc_comm_t comm, int rank, cudaStream_t s) {
  int nranks = 0;
  cc_comm_size(comm, &nranks);
  Buffers b(1);
  const float mine = static_cast<float>(rank + 1);
  cudaMemcpy(b.send, &mine, sizeof mine, cudaMemcpyHostToDevice);
  const cc_result_t r =
      cc_allreduce(b.send, b.recv, 1, CC_FLOAT32, CC_SUM, comm, reinterpret_cast<cc_stream_t>(s));
  if (r != CC_SUCCESS) return fail("all-reduce: " + words(r));
  if (!wait_stream(s, milliseconds(30000))) return fail("the all-reduce did not finish");
  float sum = 0;
  cudaMemcpy(&sum, b.recv, sizeof sum, cudaMemcpyDeviceToHost);
  const float want = static_cast<float>(nranks * (nranks + 1) / 2);
  if (sum != want)
    return fail("all-reduce gave " + std::to_string(sum) + ", want " + std::to_string(want));
  std::printf("OK init, all-reduce %g\n", static_cast<double>(sum));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (no_cuda_device()) return 77;
  if (mode == "probe") return 0;
  const int rank = env_int("RANK", 0);
  cc_comm_t comm = nullptr;
  if (mode == "init") {
    std::printf("START_AT %lld\n", realtime_ns());
    std::fflush(stdout);
  }
  const auto t0 = Clock::now();
  const cc_result_t init = cc_comm_init_from_env(&comm, nullptr);
  if (mode == "init" && init != CC_SUCCESS) {
    std::printf("ERROR_AT %lld %s %s\n", realtime_ns(), cc_result_string(init), cc_last_error());
    std::fflush(stdout);
    return 3;
  }
  if (mode == "init-missing") {
    const long long took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    if (init != CC_ERR_TIMEOUT)
      return fail("init returned " + words(init) + ", not CC_ERR_TIMEOUT");
    std::printf("OK after %lld ms: %s\n", took, cc_last_error());
    return 0;
  }
  if (init != CC_SUCCESS) return fail("init: " + words(init));
  return run_mode(mode,
                  {{"kill-loop", kill_loop},
                   {"skip", skip},
                   {"abort-threads", abort_threads},
                   {"init", allreduce_once}},
                  comm, rank);
}
