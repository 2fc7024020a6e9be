// One rank of the recovery scenarios on GPUs (tests/gpu/gpu_recovery.sh,
// scripts/recovery-bench.sh), started by cc-run or by hand. With no GPU it
// says so and exits 77 (skipped).
//
//   gpu_recovery shrink   loop all-reduces until a call fails (the victim
//                         kills itself at iteration RECOVERY_KILL_AT in its
//                         first life; -1: it waits to be killed), then the
//                         survivors cc_comm_shrink and check their all-reduces
//   gpu_recovery regrow   the same, then cc_comm_regrow to the world size; the
//                         victim's replacement (cc-run --max-restarts) joins
//   gpu_recovery init     a plain start: times the first collective
//   gpu_recovery probe    prints the NCCL loaded and whether it has ncclCommShrink
//
// Environment: RECOVERY_VICTIM (default 1), RECOVERY_KILL_AT (default 20),
// LOOP_COUNT (floats per all-reduce, default 1 Mi).
// stdout: "LOOPING R", "FAILED_AT <ns> <result> <message>", "RECOVERED_AT <ns>
// generation=G rank=R size=N failed=LIST" (after the first correct collective
// of the new communicator), "START_AT <ns>" and "FIRST_AT <ns>" (a
// replacement or a plain start: process start and first correct collective),
// then "OK <message>" and exit 0, or "FAIL <why>" and exit 1. Times are
// CLOCK_REALTIME, so a script can compare them with its own.
#include <dlfcn.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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

const long long g_start_ns = realtime_ns();  // as early as this process can tell

bool is_failure(cc_result_t r) {
  return r == CC_ERR_PEER_FAILED || r == CC_ERR_TIMEOUT || r == CC_ERR_ABORTED;
}

// Every rank contributes job_rank + 1 (the rank it was started with) to a
// sum; `want` is the sum over the communicator's members. Returns CC_SUCCESS
// only when the call worked, the stream finished, comm is still healthy and
// every element is right; *wrong says why not when the values are off.
cc_result_t checked_allreduce(cc_comm_t comm, cudaStream_t s, Buffers& b, int job_rank, float want,
                              std::string* wrong) {
  std::vector<float> host(b.count, static_cast<float>(job_rank + 1));
  cudaMemcpyAsync(b.send, host.data(), b.count * sizeof(float), cudaMemcpyHostToDevice, s);
  cudaMemsetAsync(b.recv, 0xff, b.count * sizeof(float), s);
  cc_result_t r = cc_allreduce(b.send, b.recv, b.count, CC_FLOAT32, CC_SUM, comm,
                               reinterpret_cast<cc_stream_t>(s));
  if (r != CC_SUCCESS) return r;
  cudaMemcpyAsync(host.data(), b.recv, b.count * sizeof(float), cudaMemcpyDeviceToHost, s);
  if (!wait_stream(s, milliseconds(60000))) {
    *wrong = "the stream did not finish within 60 s";
    return CC_ERR_INTERNAL;
  }
  if ((r = cc_comm_check(comm)) != CC_SUCCESS) return r;
  for (size_t i = 0; i < b.count; ++i)
    if (host[i] != want) {
      *wrong = "element " + std::to_string(i) + " is " + std::to_string(host[i]) + ", want " +
               std::to_string(want);
      return CC_ERR_INTERNAL;
    }
  return CC_SUCCESS;
}

std::string list(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out.empty() ? "-" : out;
}

// The members' contribution: every job rank of [0, world) not in `gone`.
float sum_without(int world, const std::vector<int>& gone) {
  float want = 0;
  for (int r = 0; r < world; ++r) {
    bool out = false;
    for (int g : gone) out = out || g == r;
    if (!out) want += static_cast<float>(r + 1);
  }
  return want;
}

// Ten checked all-reduces on comm, large and small (cc's own kernel where it
// runs); the first one's end is printed as `first_line`.
int ten_right(cc_comm_t comm, cudaStream_t s, int job_rank, float want,
              const std::string& first_line) {
  Buffers large(static_cast<size_t>(env_int("LOOP_COUNT", 1 << 20)));
  Buffers small(256);
  for (int i = 0; i < 10; ++i) {
    std::string wrong;
    Buffers& b = i % 2 == 0 ? large : small;
    const cc_result_t r = checked_allreduce(comm, s, b, job_rank, want, &wrong);
    if (r != CC_SUCCESS)
      return fail("all-reduce " + std::to_string(i) + " on the new communicator: " +
                  (wrong.empty() ? words(r) : wrong));
    if (i == 0) {
      std::printf("%s %lld\n", first_line.c_str(), realtime_ns());
      std::fflush(stdout);
    }
  }
  return 0;
}

// The survivor's side: loop until a call fails, then recover.
int survive(cc_comm_t comm, const std::string& mode, cudaStream_t s) {
  int rank = 0, world = 0;
  cc_comm_rank(comm, &rank);
  cc_comm_size(comm, &world);
  const int victim = env_int("RECOVERY_VICTIM", 1);
  const int kill_at = env_int("RECOVERY_KILL_AT", 20);
  const bool restarted = std::getenv("CC_RESTART_COUNT") != nullptr;
  Buffers b(static_cast<size_t>(env_int("LOOP_COUNT", 1 << 20)));
  cc_result_t r = CC_SUCCESS;
  std::string wrong;
  for (int i = 0;; ++i) {
    if (rank == victim && i == kill_at && !restarted) raise(SIGKILL);
    r = checked_allreduce(comm, s, b, rank, sum_without(world, {}), &wrong);
    if (r != CC_SUCCESS) break;
    if (i == 3) {
      std::printf("LOOPING %d\n", rank);
      std::fflush(stdout);
    }
    if (i > 100000) return fail("no call failed");
  }
  if (!wrong.empty()) return fail("before the failure: " + wrong);
  std::printf("FAILED_AT %lld %s %s\n", realtime_ns(), cc_result_string(r), cc_last_error());
  std::fflush(stdout);
  if (!is_failure(r)) return fail("the failure was " + words(r));

  cc_comm_t next = nullptr;
  for (int attempt = 1;; ++attempt) {
    r = mode == "shrink" ? cc_comm_shrink(comm, 0, &next) : cc_comm_regrow(comm, world, 0, &next);
    if (r == CC_SUCCESS) break;
    std::printf("attempt %d: %s\n", attempt, words(r).c_str());
    if (!is_failure(r) || attempt == 3) return fail(mode + ": " + words(r));
  }
  int failed[64], count = 0, generation = -1, new_rank = -1, size = 0;
  cc_comm_failed_ranks(next, failed, 64, &count);
  cc_comm_generation(next, &generation);
  cc_comm_rank(next, &new_rank);
  cc_comm_size(next, &size);
  const std::vector<int> gone(failed, failed + (count < 64 ? count : 64));
  const auto destroy_start = Clock::now();
  if (cc_comm_destroy(comm) != CC_SUCCESS) return fail("destroying the failed communicator: " + words(r));
  std::printf("DESTROY_MS %lld\n",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(Clock::now() - destroy_start).count()));
  const std::string where = "generation=" + std::to_string(generation) +
                            " rank=" + std::to_string(new_rank) + " size=" + std::to_string(size) +
                            " failed=" + list(gone);
  if (generation != 1) return fail("generation " + std::to_string(generation) + ", want 1");
  if (gone != std::vector<int>{victim}) return fail("failed ranks " + list(gone));
  const bool shrunk = mode == "shrink";
  if (size != (shrunk ? world - 1 : world)) return fail("size " + std::to_string(size));
  if (!shrunk && new_rank != rank) return fail("a survivor's rank changed: " + where);
  const float want = shrunk ? sum_without(world, gone) : sum_without(world, {});
  if (int rc = ten_right(next, s, rank, want, "RECOVERED_AT"); rc != 0) return rc;
  std::printf("RECOVERED %s\n", where.c_str());
  std::printf("OK %s: rank %d of %d, generation %d, failed ranks %s; 10 all-reduces right\n",
              shrunk ? "shrunk" : "regrown", new_rank, size, generation, list(gone).c_str());
  std::fflush(stdout);
  cc_comm_destroy(next);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (no_cuda_device()) return 77;
  if (mode == "probe") {
    using GetVersion = int (*)(int*);  // ncclGetVersion, from the libnccl libcc loaded
    const auto get = reinterpret_cast<GetVersion>(dlsym(RTLD_DEFAULT, "ncclGetVersion"));
    int version = 0;
    if (get != nullptr) get(&version);
    std::printf("NCCL %d loaded; ncclCommShrink %s\n", version,
                dlsym(RTLD_DEFAULT, "ncclCommShrink") != nullptr ? "yes" : "no");
    return 0;
  }
  if (mode != "shrink" && mode != "regrow" && mode != "init")
    return fail("unknown mode '" + mode + "'");
  cc_comm_t comm = nullptr;
  if (cc_result_t r = cc_comm_init_from_env(&comm, nullptr); r != CC_SUCCESS)
    return fail("init: " + words(r));
  int rank = 0, world = 0, generation = 0;
  cc_comm_rank(comm, &rank);
  cc_comm_size(comm, &world);
  cc_comm_generation(comm, &generation);
  cudaStream_t s = stream_on_device(comm);
  int rc = 0;
  if (mode == "init" || generation > 0) {
    // A plain start, or a replacement: time the first correct collective.
    std::printf("START_AT %lld\n", g_start_ns);
    rc = ten_right(comm, s, rank, sum_without(world, {}), "FIRST_AT");
    if (rc == 0)
      std::printf("OK %s: rank %d of %d, generation %d; 10 all-reduces right\n",
                  generation > 0 ? "replacement" : "init", rank, world, generation);
    cc_comm_destroy(comm);
  } else {
    rc = survive(comm, mode, s);
  }
  cudaStreamDestroy(s);
  return rc;
}
