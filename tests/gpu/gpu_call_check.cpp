// One rank of the call-check scenarios, started by gpu_call_check.sh under
// `cc-run --share-gpu -n N`. With no GPU it says so and exits 77 (skipped).
//
//   gpu_call_check diverge WAY   49 all-reduces of 4096 floats alike; at op
//                                #50 rank 1 makes another call, by WAY:
//                                kind (an all-gather), count (4097), type
//                                (float16), op (max), root (a broadcast from
//                                root 1 where the others name root 0), skip
//                                (rank 1 skips op #50, a broadcast), extra
//                                (rank 1 calls a barrier first). Every rank
//                                then polls cc_comm_check; prints
//                                "MISMATCH_MS <ms since op #50> <message>" and
//                                exits 0 when it returned CC_ERR_MISMATCH
//                                within 5 s (the time is printed, not judged).
//   gpu_call_check legal         two communicators of the same ranks on two
//                                streams, their calls interleaved, 300
//                                rounds; then waits past three heartbeats:
//                                prints "OK legal" when neither failed. Every
//                                rank issues them in the same order: NCCL
//                                leaves calls on two communicators issued in
//                                another order on another rank undefined (it
//                                may deadlock, and did on one shared GPU), so
//                                that legal-for-the-check case is a unit test
//                                of the rules (tests/unit/test_call_check.cpp).
//   gpu_call_check loop          all-reduces until a call fails (the script
//                                kills a rank, or sends SIGUSR1); prints
//                                "LOOPING pid <pid>" once going and
//                                "ERROR <message>".
//   gpu_call_check split         4 ranks split by parity; in the even ranks'
//                                child its rank 1 differs at op #50 (count):
//                                those ranks print MISMATCH_MS as diverge; the
//                                odd ranks' child agrees: "OK split alike";
//                                neither parent is flagged.
//   gpu_call_check skip          20 all-reduces alike but rank 1 skips the
//                                10th: the deadline's message (CC_TIMEOUT_MS).
// CC_TRACE_DIR, when set, is where every rank's flight recorder goes.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <cuda_runtime_api.h>

#include "cc/cc.h"
#include "tests/gpu/rank_program.hpp"

namespace {

using namespace cc::test;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kCount = 4096;

cc_stream_t as_cc(cudaStream_t s) { return reinterpret_cast<cc_stream_t>(s); }

// Polls cc_comm_check until it fails or `limit` passed; the failure.
cc_result_t wait_for_failure(cc_comm_t comm, milliseconds limit) {
  const auto until = Clock::now() + limit;
  for (;;) {
    const cc_result_t r = cc_comm_check(comm);
    if (r != CC_SUCCESS || Clock::now() > until) return r;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// Rank 1's call at op #50, by way of difference; the other ranks' is an
// all-reduce of kCount floats (a broadcast for skip).
cc_result_t call_50(const std::string& way, int rank, cc_comm_t comm, Buffers& b, cudaStream_t s) {
  const bool odd_one = rank == 1;
  if (way == "kind" && odd_one)
    return cc_allgather(b.send, b.recv, kCount / 4, CC_FLOAT32, comm, as_cc(s));
  if (way == "count" && odd_one)
    return cc_allreduce(b.send, b.recv, kCount + 1, CC_FLOAT32, CC_SUM, comm, as_cc(s));
  if (way == "type" && odd_one)
    return cc_allreduce(b.send, b.recv, kCount, CC_FLOAT16, CC_SUM, comm, as_cc(s));
  if (way == "op" && odd_one)
    return cc_allreduce(b.send, b.recv, kCount, CC_FLOAT32, CC_MAX, comm, as_cc(s));
  if (way == "root")
    return cc_broadcast(b.send, b.recv, kCount, CC_FLOAT32, odd_one ? 1 : 0, comm, as_cc(s));
  if (way == "skip") {
    if (!odd_one) return cc_broadcast(b.send, b.recv, kCount, CC_FLOAT32, 0, comm, as_cc(s));
    return cc_allreduce(b.send, b.recv, kCount, CC_FLOAT32, CC_SUM, comm, as_cc(s));
  }
  if (way == "extra" && odd_one) {
    const cc_result_t r = cc_barrier(comm, as_cc(s));
    if (r != CC_SUCCESS) return r;
  }
  return cc_allreduce(b.send, b.recv, kCount, CC_FLOAT32, CC_SUM, comm, as_cc(s));
}

int diverge(const std::string& way, cc_comm_t comm, int rank, cudaStream_t s) {
  Buffers b(kCount * 64);  // room for an all-gather over up to 16 ranks, and the count + 1
  for (int i = 1; i < 50; ++i) {
    const cc_result_t r = cc_allreduce(b.send, b.recv, kCount, CC_FLOAT32, CC_SUM, comm, as_cc(s));
    if (r != CC_SUCCESS) return fail("op #" + std::to_string(i) + ": " + words(r));
  }
  if (!wait_stream(s, milliseconds(30000))) return fail("the first 49 calls did not finish");
  // The answer must come within the time the test waits for it; how long it
  // took is printed for the benchmark notes, not judged (a shared GPU's
  // timing varies run to run).
  constexpr milliseconds kWithin{5000};
  const auto at_50 = Clock::now();
  cc_result_t r = call_50(way, rank, comm, b, s);
  if (r == CC_SUCCESS) r = wait_for_failure(comm, kWithin);
  const long long ms = std::chrono::duration_cast<milliseconds>(Clock::now() - at_50).count();
  std::printf("MISMATCH_MS %lld %s %s\n", ms, cc_result_string(r), cc_last_error());
  std::fflush(stdout);
  // The calls after it fail too, with the same message.
  const cc_result_t next = cc_allreduce(b.send, b.recv, 1, CC_FLOAT32, CC_SUM, comm, as_cc(s));
  if (r != CC_ERR_MISMATCH) return fail("rank " + std::to_string(rank) + ": " + words(r));
  if (next != CC_ERR_MISMATCH) return fail("the next call returned " + words(next));
  if (ms > kWithin.count())
    return fail("CC_ERR_MISMATCH came " + std::to_string(ms) + " ms after op #50");
  return 0;
}

int legal(cc_comm_t a, cudaStream_t s) {
  cc_comm_t b = nullptr;
  if (cc_result_t r = cc_comm_init_from_env(&b, nullptr); r != CC_SUCCESS)
    return fail("the second communicator: " + words(r));
  cudaStream_t s2 = nullptr;
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  Buffers x(kCount), y(kCount);
  int rc = 0;
  for (int i = 0; i < 300 && rc == 0; ++i) {
    auto on_a = [&] {
      return cc_allreduce(x.send, x.recv, kCount, CC_FLOAT32, CC_SUM, a, as_cc(s));
    };
    auto on_b = [&] { return cc_broadcast(y.send, y.recv, kCount, CC_FLOAT32, 0, b, as_cc(s2)); };
    // a then b on even rounds, b then a on odd ones: the streams interleave.
    const cc_result_t r1 = i % 2 == 0 ? on_a() : on_b();
    const cc_result_t r2 = i % 2 == 0 ? on_b() : on_a();
    if (r1 != CC_SUCCESS || r2 != CC_SUCCESS)
      rc = fail("round " + std::to_string(i) + ": " + words(r1 != CC_SUCCESS ? r1 : r2));
    if (i % 50 == 49 &&
        (!wait_stream(s, milliseconds(30000)) || !wait_stream(s2, milliseconds(30000))))
      rc = fail("round " + std::to_string(i) + ": the streams did not finish");
  }
  // Three heartbeats: every point reached the rendezvous and was compared.
  std::this_thread::sleep_for(milliseconds(3 * env_int("CC_HEARTBEAT_MS", 1000) + 500));
  if (rc == 0)
    for (cc_comm_t c : {a, b})
      if (cc_result_t r = cc_comm_check(c); r != CC_SUCCESS) rc = fail("flagged: " + words(r));
  // Both communicators still agree on a barrier before they go.
  if (rc == 0 && (cc_barrier(a, as_cc(s)) != CC_SUCCESS || !wait_stream(s, milliseconds(30000))))
    rc = fail("the last barrier failed");
  cc_comm_destroy(b);
  cudaStreamDestroy(s2);
  if (rc == 0) std::printf("OK legal\n");
  return rc;
}

int loop(cc_comm_t comm, cudaStream_t s) {
  Buffers b(kCount);
  const auto until = Clock::now() + milliseconds(env_int("LOOP_MS", 60000));
  for (int i = 0; Clock::now() < until; ++i) {
    const cc_result_t r = cc_allreduce(b.send, b.recv, kCount, CC_FLOAT32, CC_SUM, comm, as_cc(s));
    if (r != CC_SUCCESS) {
      std::printf("ERROR %s\n", words(r).c_str());
      return 0;
    }
    if (!wait_stream(s, milliseconds(30000))) return fail("a stream did not finish");
    if (i == 20) {
      std::printf("LOOPING pid %d\n", static_cast<int>(getpid()));
      std::fflush(stdout);
    }
  }
  std::printf("OK loop ended\n");
  return 0;
}

int skip(cc_comm_t comm, int rank, cudaStream_t s) {
  Buffers b(kCount);
  for (int i = 1; i <= 20; ++i) {
    if (rank == 1 && i == 10) continue;
    const cc_result_t r = cc_allreduce(b.send, b.recv, kCount, CC_FLOAT32, CC_SUM, comm, as_cc(s));
    if (r != CC_SUCCESS) {
      std::printf("ERROR %s\n", words(r).c_str());
      return 0;
    }
  }
  const cc_result_t r =
      wait_for_failure(comm, milliseconds(env_int("CC_TIMEOUT_MS", 3000) + 10000));
  std::printf("ERROR %s\n", words(r).c_str());
  return r != CC_SUCCESS ? 0 : 1;
}

// Split in two by rank parity: in the child of the even ranks its rank 1
// (job rank 2) all-reduces one float more at op #50 (diverge's count), so
// that child's ranks get CC_ERR_MISMATCH; the odd ranks' child, whose calls
// agree, is not flagged, nor is the parent: each line is compared on its own.
int split(cc_comm_t comm, int rank, cudaStream_t s) {
  cc_comm_t child = nullptr;
  if (cc_result_t r = cc_comm_split(comm, rank % 2, rank, &child, nullptr); r != CC_SUCCESS)
    return fail("cc_comm_split: " + words(r));
  int child_rank = 0;
  cc_comm_rank(child, &child_rank);
  int rc = 0;
  if (rank % 2 == 0) {
    rc = diverge("count", child, child_rank, s);
  } else {
    Buffers b(kCount);
    for (int i = 1; i <= 60 && rc == 0; ++i)
      if (cc_result_t r = cc_allreduce(b.send, b.recv, kCount, CC_FLOAT32, CC_SUM, child, as_cc(s));
          r != CC_SUCCESS)
        rc = fail("the agreeing child's op #" + std::to_string(i) + ": " + words(r));
    if (rc == 0 && !wait_stream(s, milliseconds(30000))) rc = fail("the agreeing child's calls");
    std::this_thread::sleep_for(milliseconds(3 * env_int("CC_HEARTBEAT_MS", 1000) + 500));
    if (rc == 0)
      if (cc_result_t r = cc_comm_check(child); r != CC_SUCCESS) rc = fail("flagged: " + words(r));
    if (rc == 0) std::printf("OK split alike\n");
  }
  if (rc == 0)
    if (cc_result_t r = cc_comm_check(comm); r != CC_SUCCESS)
      rc = fail("the parent was flagged: " + words(r));
  cc_comm_destroy(child);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  return run_rank_program(
      mode, {{"diverge",
              [&](cc_comm_t c, int r, cudaStream_t s) {
                // the kind of divergence is its argument: none, no such mode
                return argc > 2 ? diverge(argv[2], c, r, s) : fail("unknown mode '" + mode + "'");
              }},
             {"legal", [](cc_comm_t c, int, cudaStream_t s) { return legal(c, s); }},
             {"loop", [](cc_comm_t c, int, cudaStream_t s) { return loop(c, s); }},
             {"split", split},
             {"skip", skip}});
}
