// The C API's argument and state checks, with no GPU: every check returns
// its code and names the argument as text. Runs with CUDA_VISIBLE_DEVICES
// empty, so it behaves the same on a GPU machine.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "cc/cc.h"
#include "lib/comm/args.hpp"
#include "lib/comm/comm.hpp"

namespace {

std::string last() { return cc_last_error(); }

// A communicator that never touched NCCL: enough for every check that runs
// before NCCL would.
cc_comm_t fake_comm(int rank, int nranks) {
  auto* c = new cc_comm();
  c->rank = rank;
  c->nranks = nranks;
  c->host = "testhost";
  c->device = 0;
  return c;
}

// Non-NULL device pointers that are never dereferenced (checks fail first).
void* const kBufA = reinterpret_cast<void*>(0x1000);
void* const kBufB = reinterpret_cast<void*>(0x2000);

}  // namespace

TEST_CASE("cc_result_string names every code") {
  const char* names[] = {"CC_SUCCESS",
                         "CC_ERR_INVALID_ARGUMENT",
                         "CC_ERR_INVALID_USAGE",
                         "CC_ERR_NO_DEVICE",
                         "CC_ERR_CUDA",
                         "CC_ERR_NCCL",
                         "CC_ERR_SYSTEM",
                         "CC_ERR_RENDEZVOUS",
                         "CC_ERR_AUTH",
                         "CC_ERR_MISMATCH",
                         "CC_ERR_TIMEOUT",
                         "CC_ERR_PEER_FAILED",
                         "CC_ERR_ABORTED",
                         "CC_ERR_INTERNAL",
                         "CC_ERR_BUFFER_TOO_SMALL"};
  static_assert(sizeof names / sizeof names[0] == CC_NUM_RESULTS);
  for (int i = 0; i < CC_NUM_RESULTS; ++i) {
    const std::string s = cc_result_string(static_cast<cc_result_t>(i));
    INFO("code " << i << ": " << s);
    CHECK(s.rfind(std::string(names[i]) + ": ", 0) == 0);
    CHECK(s.size() > std::string(names[i]).size() + 4);
  }
  CHECK(std::string(cc_result_string(CC_NUM_RESULTS)) == "unknown cc_result_t value");
  CHECK(std::string(cc_result_string(static_cast<cc_result_t>(-1))) == "unknown cc_result_t value");
}

TEST_CASE("collectives on a NULL comm name the call and the comm") {
  float x = 0;
  struct Case {
    const char* call;
    cc_result_t r;
  } cases[] = {
      {"cc_allreduce", cc_allreduce(&x, &x, 1, CC_FLOAT32, CC_SUM, nullptr, nullptr)},
      {"cc_broadcast", cc_broadcast(&x, &x, 1, CC_FLOAT32, 0, nullptr, nullptr)},
      {"cc_reduce", cc_reduce(&x, &x, 1, CC_FLOAT32, CC_SUM, 0, nullptr, nullptr)},
      {"cc_allgather", cc_allgather(&x, &x, 1, CC_FLOAT32, nullptr, nullptr)},
      {"cc_reducescatter", cc_reducescatter(&x, &x, 1, CC_FLOAT32, CC_SUM, nullptr, nullptr)},
      {"cc_alltoall", cc_alltoall(&x, &x, 1, CC_FLOAT32, nullptr, nullptr)},
      {"cc_send", cc_send(&x, 1, CC_FLOAT32, 0, nullptr, nullptr)},
      {"cc_recv", cc_recv(&x, 1, CC_FLOAT32, 0, nullptr, nullptr)},
      {"cc_barrier", cc_barrier(nullptr, nullptr)},
  };
  for (const auto& c : cases) {
    INFO(c.call);
    CHECK(c.r == CC_ERR_INVALID_ARGUMENT);
  }
  // The last error is the last call's.
  CHECK(last() ==
        "cc_barrier: comm is NULL; create one with cc_comm_init or "
        "cc_comm_init_from_env first");
  CHECK(cc_allreduce(&x, &x, 1, CC_FLOAT32, CC_SUM, nullptr, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last().rfind("cc_allreduce: comm is NULL", 0) == 0);

  int v = 0;
  cc_comm_t out = nullptr;
  CHECK(cc_comm_rank(nullptr, &v) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_comm_size(nullptr, &v) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_comm_device(nullptr, &v) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_comm_timeout(nullptr, &v) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last().rfind("cc_comm_timeout: comm is NULL", 0) == 0);
  char plan[128];
  CHECK(cc_comm_allreduce_plan(nullptr, plan, sizeof plan) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last().rfind("cc_comm_allreduce_plan: comm is NULL", 0) == 0);
  CHECK(cc_comm_abort(nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last().rfind("cc_comm_abort: comm is NULL", 0) == 0);
  CHECK(cc_comm_split(nullptr, 0, 0, &out, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last().rfind("cc_comm_split: comm is NULL", 0) == 0);
  CHECK(out == nullptr);
}

TEST_CASE("destroying NULL is a no-op that clears the last error") {
  CHECK(cc_barrier(nullptr, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_comm_destroy(nullptr) == CC_SUCCESS);
  CHECK(last().empty());
}

TEST_CASE("cc_comm_init checks its arguments, naming each") {
  cc_comm_t comm = reinterpret_cast<cc_comm_t>(0x1);  // must be reset to NULL
  struct Case {
    cc_result_t r;
    const char* words;
  } cases[] = {
      {cc_comm_init(nullptr, 0, 2, "127.0.0.1", 29500, nullptr), "comm is NULL"},
      {cc_comm_init(&comm, 0, 0, "127.0.0.1", 29500, nullptr), "nranks 0 must be at least 1"},
      {cc_comm_init(&comm, -1, 2, "127.0.0.1", 29500, nullptr), "rank -1 is outside [0, nranks=2)"},
      {cc_comm_init(&comm, 2, 2, "127.0.0.1", 29500, nullptr), "rank 2 is outside [0, nranks=2)"},
      {cc_comm_init(&comm, 0, 2, nullptr, 29500, nullptr), "master_addr is NULL"},
      {cc_comm_init(&comm, 0, 2, "", 29500, nullptr), "master_addr is empty"},
      {cc_comm_init(&comm, 0, 2, "127.0.0.1", 0, nullptr), "master_port 0 is outside 1..65535"},
      {cc_comm_init(&comm, 0, 2, "127.0.0.1", 65536, nullptr),
       "master_port 65536 is outside 1..65535"},
  };
  for (const auto& c : cases) {
    INFO(c.words);
    CHECK(c.r == CC_ERR_INVALID_ARGUMENT);
  }
  CHECK(comm == nullptr);
  // Words of each, checked one by one (the last error is per call).
  CHECK(cc_comm_init(&comm, 3, 2, "h", 1, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("rank 3 is outside [0, nranks=2)"));
  CHECK(cc_comm_init(&comm, 0, 2, "", 1, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("master_addr is empty") && Catch::Contains("MASTER_ADDR"));
  CHECK(cc_comm_init(&comm, 0, 2, "h", 70000, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("master_port 70000 is outside 1..65535"));
  CHECK(cc_comm_init(&comm, 0, -5, "h", 1, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("nranks -5 must be at least 1"));
}

TEST_CASE("cc_comm_init refuses a config not made with CC_CONFIG_INIT") {
  cc_config_t config = CC_CONFIG_INIT;
  config.magic = 0;
  cc_comm_t comm = nullptr;
  CHECK(cc_comm_init(&comm, 0, 1, "127.0.0.1", 29500, &config) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("CC_CONFIG_INIT"));
  CHECK(comm == nullptr);
}

TEST_CASE("cc_comm_init with no visible GPU fails at once with CC_ERR_NO_DEVICE") {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  REQUIRE(cvd != nullptr);  // meson sets it empty for this test
  REQUIRE(std::string(cvd).empty());
  cc_comm_t comm = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  // Port 1 would need root and nothing listens there: no network wait may happen.
  const cc_result_t r = cc_comm_init(&comm, 1, 2, "127.0.0.1", 1, nullptr);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(r == CC_ERR_NO_DEVICE);
  CHECK(comm == nullptr);
  CHECK(took < std::chrono::milliseconds(1000));
  const std::string words = last();
  CHECK_THAT(words, Catch::StartsWith("rank 1 (host "));
  CHECK_THAT(words, Catch::Contains("no CUDA device is visible (cudaGetDeviceCount: "));
  CHECK_THAT(words, Catch::Contains("CUDA_VISIBLE_DEVICES"));
  CHECK_THAT(words, Catch::Contains("nvidia-smi"));
  CHECK_THAT(words, Catch::Contains("--gpus"));

  // Rank 0 too: the device check comes before it would start the rendezvous server.
  const auto t1 = std::chrono::steady_clock::now();
  CHECK(cc_comm_init(&comm, 0, 2, "127.0.0.1", 29500, nullptr) == CC_ERR_NO_DEVICE);
  CHECK(std::chrono::steady_clock::now() - t1 < std::chrono::milliseconds(1000));
  CHECK_THAT(last(), Catch::StartsWith("rank 0 (host "));
}

TEST_CASE("cc_comm_init_from_env names a missing RANK") {
  for (const char* v : {"CC_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
    unsetenv(v);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  cc_comm_t comm = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(cc_comm_init_from_env(&comm, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1000));
  CHECK(comm == nullptr);
  CHECK_THAT(last(), Catch::StartsWith("cc_comm_init_from_env: ") && Catch::Contains("RANK"));
  CHECK(cc_comm_init_from_env(nullptr, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("comm is NULL"));

  // With the whole environment but no GPU: the device check answers.
  setenv("RANK", "0", 1);
  CHECK(cc_comm_init_from_env(&comm, nullptr) == CC_ERR_NO_DEVICE);
  CHECK_THAT(last(), Catch::StartsWith("rank 0 (host "));
  setenv("RANK", "zero", 1);
  CHECK(cc_comm_init_from_env(&comm, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("RANK"));
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(v);
}

TEST_CASE("collective arguments are checked before NCCL, naming each") {
  cc_comm_t comm = fake_comm(0, 2);
  const auto expect = [](cc_result_t r, const std::string& words) {
    INFO(words);
    CHECK(r == CC_ERR_INVALID_ARGUMENT);
    CHECK_THAT(last(), Catch::Contains(words));
    CHECK_THAT(last(), Catch::Contains("rank 0 (host testhost"));
  };
  SECTION("NULL buffers with a count") {
    expect(cc_allreduce(nullptr, kBufB, 5, CC_FLOAT32, CC_SUM, comm, nullptr),
           "cc_allreduce on rank 0 (host testhost): sendbuf is NULL but count is 5");
    expect(cc_allreduce(kBufA, nullptr, 5, CC_FLOAT32, CC_SUM, comm, nullptr),
           "recvbuf is NULL but count is 5");
    expect(cc_broadcast(nullptr, kBufB, 3, CC_INT32, 0, comm, nullptr),
           "cc_broadcast on rank 0 (host testhost): sendbuf is NULL");
    expect(cc_reduce(kBufA, nullptr, 3, CC_INT32, CC_MAX, 0, comm, nullptr), "recvbuf is NULL");
    expect(cc_allgather(kBufA, nullptr, 3, CC_INT8, comm, nullptr),
           "recvbuf is NULL but count is 6");
    expect(cc_reducescatter(nullptr, kBufB, 3, CC_INT8, CC_SUM, comm, nullptr),
           "sendbuf is NULL but count is 6");
    expect(cc_alltoall(kBufA, nullptr, 4, CC_UINT64, comm, nullptr), "recvbuf is NULL");
    expect(cc_send(nullptr, 1, CC_FLOAT64, 1, comm, nullptr),
           "cc_send on rank 0 (host testhost): buf is NULL");
    expect(cc_recv(nullptr, 1, CC_FLOAT64, 1, comm, nullptr),
           "cc_recv on rank 0 (host testhost): buf is NULL");
  }
  SECTION("roots and peers outside the communicator") {
    expect(cc_broadcast(kBufA, kBufB, 1, CC_FLOAT32, 2, comm, nullptr),
           "root 2 is outside the communicator's ranks [0, 2)");
    expect(cc_broadcast(kBufA, kBufB, 1, CC_FLOAT32, -1, comm, nullptr), "root -1 is outside");
    expect(cc_reduce(kBufA, kBufB, 1, CC_FLOAT32, CC_SUM, 7, comm, nullptr), "root 7 is outside");
    expect(cc_send(kBufA, 1, CC_FLOAT32, 2, comm, nullptr), "peer 2 is outside");
    expect(cc_recv(kBufA, 1, CC_FLOAT32, -3, comm, nullptr), "peer -3 is outside");
  }
  SECTION("unknown datatypes and ops") {
    const auto bad_type = static_cast<cc_datatype_t>(12);
    const auto neg_type = static_cast<cc_datatype_t>(-1);
    const auto bad_op = static_cast<cc_redop_t>(5);
    expect(cc_allreduce(kBufA, kBufB, 1, bad_type, CC_SUM, comm, nullptr),
           "dtype 12 is not a cc_datatype_t");
    expect(cc_allreduce(kBufA, kBufB, 1, neg_type, CC_SUM, comm, nullptr),
           "dtype -1 is not a cc_datatype_t");
    expect(cc_allreduce(kBufA, kBufB, 1, CC_FLOAT32, bad_op, comm, nullptr),
           "op 5 is not a cc_redop_t");
    expect(cc_reduce(kBufA, kBufB, 1, CC_FLOAT32, static_cast<cc_redop_t>(-2), 0, comm, nullptr),
           "op -2 is not a cc_redop_t");
    expect(cc_reducescatter(kBufA, kBufB, 1, CC_INT8, bad_op, comm, nullptr), "op 5");
    expect(cc_broadcast(kBufA, kBufB, 1, bad_type, 0, comm, nullptr), "dtype 12");
    expect(cc_allgather(kBufA, kBufB, 1, bad_type, comm, nullptr), "dtype 12");
    expect(cc_alltoall(kBufA, kBufB, 1, bad_type, comm, nullptr), "dtype 12");
    expect(cc_send(kBufA, 1, bad_type, 1, comm, nullptr), "dtype 12");
    expect(cc_recv(kBufA, 1, bad_type, 1, comm, nullptr), "dtype 12");
  }
  SECTION("byte sizes that overflow") {
    const size_t max = std::numeric_limits<size_t>::max();
    expect(cc_allreduce(kBufA, kBufB, max / 2, CC_FLOAT32, CC_SUM, comm, nullptr),
           "count " + std::to_string(max / 2) + " of CC_FLOAT32 overflows");
    expect(cc_send(kBufA, max, CC_INT64, 1, comm, nullptr), "overflows");
    expect(cc_allgather(kBufA, kBufB, max / 2 + 1, CC_INT8, comm, nullptr),
           "sendcount " + std::to_string(max / 2 + 1) + " x 2 ranks of CC_INT8 overflows");
    expect(cc_reducescatter(kBufA, kBufB, max / 4 + 1, CC_FLOAT16, CC_SUM, comm, nullptr),
           "recvcount " + std::to_string(max / 4 + 1) + " x 2 ranks of CC_FLOAT16 overflows");
    expect(cc_alltoall(kBufA, kBufB, max / 3, CC_UINT32, comm, nullptr), "x 2 ranks of CC_UINT32");
  }
  SECTION("alltoall is not in-place") {
    expect(cc_alltoall(kBufA, kBufA, 4, CC_FLOAT32, comm, nullptr),
           "sendbuf and recvbuf are the same buffer");
  }
  SECTION("split needs somewhere to put the new communicator") {
    expect(cc_comm_split(comm, 0, 0, nullptr, nullptr), "newcomm is NULL");
  }
  CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
}

TEST_CASE("a root's buffers are only needed on the root") {
  cc_comm_t comm = fake_comm(1, 2);
  cc_comm_abort(comm);  // so a call that passes every check stops before NCCL
  // sendbuf of a broadcast matters on the root only: rank 1 passes NULL.
  CHECK(cc_broadcast(nullptr, kBufB, 4, CC_FLOAT32, 0, comm, nullptr) == CC_ERR_ABORTED);
  CHECK(cc_reduce(kBufA, nullptr, 4, CC_FLOAT32, CC_SUM, 0, comm, nullptr) == CC_ERR_ABORTED);
  CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
}

TEST_CASE("rank, size, device and deadline of a communicator") {
  cc_comm_t comm = fake_comm(1, 4);
  comm->timeout = std::chrono::milliseconds(4321);
  int v = -7;
  CHECK(cc_comm_rank(comm, &v) == CC_SUCCESS);
  CHECK(v == 1);
  CHECK(cc_comm_size(comm, &v) == CC_SUCCESS);
  CHECK(v == 4);
  CHECK(cc_comm_device(comm, &v) == CC_SUCCESS);
  CHECK(v == 0);
  CHECK(cc_comm_timeout(comm, &v) == CC_SUCCESS);
  CHECK(v == 4321);
  CHECK(cc_comm_rank(comm, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("rank is NULL"));
  CHECK(cc_comm_size(comm, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("nranks is NULL"));
  CHECK(cc_comm_device(comm, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("cuda_device is NULL"));
  CHECK(cc_comm_timeout(comm, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("timeout_ms is NULL"));
  // A communicator without cc's all-reduce kernels: NCCL for every size.
  char plan[128] = {};
  CHECK(cc_comm_allreduce_plan(comm, plan, sizeof plan) == CC_SUCCESS);
  CHECK(std::string(plan) == "nccl");
  CHECK(cc_comm_allreduce_plan(comm, plan, 4) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("cap 4 is too small"));
  CHECK(cc_comm_allreduce_plan(comm, nullptr, 4) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("plan is NULL"));
  CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
}

TEST_CASE("an aborted communicator says so at every call, abort is repeatable") {
  cc_comm_t comm = fake_comm(0, 2);
  CHECK(cc_comm_abort(comm) == CC_SUCCESS);
  CHECK(cc_comm_abort(comm) == CC_SUCCESS);
  int x = 0;
  CHECK(cc_allreduce(kBufA, kBufB, 1, CC_INT32, CC_SUM, comm, nullptr) == CC_ERR_ABORTED);
  CHECK_THAT(last(), Catch::StartsWith("cc_allreduce on rank 0 (host testhost): ") &&
                         Catch::Contains("aborted by cc_comm_abort") &&
                         Catch::Contains("cc_comm_destroy"));
  CHECK(cc_barrier(comm, nullptr) == CC_ERR_ABORTED);
  CHECK(cc_send(&x, 1, CC_INT32, 1, comm, nullptr) == CC_ERR_ABORTED);
  CHECK(cc_alltoall(kBufA, kBufB, 1, CC_INT32, comm, nullptr) == CC_ERR_ABORTED);
  cc_comm_t child = nullptr;
  CHECK(cc_comm_split(comm, 0, 0, &child, nullptr) == CC_ERR_ABORTED);
  CHECK(child == nullptr);
  // Argument errors still come first: they are the caller's to fix.
  CHECK(cc_allreduce(nullptr, kBufB, 1, CC_INT32, CC_SUM, comm, nullptr) ==
        CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
}

TEST_CASE("a watchdog failure is reported with its own code") {
  cc_comm_t comm = fake_comm(0, 2);
  CHECK(cc::core::fail(*comm, cc::core::State::peer_failed, "rank 1 (host b, pid 9) vanished"));
  CHECK_FALSE(cc::core::fail(*comm, cc::core::State::timed_out, "second"));  // the first wins
  CHECK(cc_barrier(comm, nullptr) == CC_ERR_PEER_FAILED);
  CHECK_THAT(last(), Catch::EndsWith("rank 1 (host b, pid 9) vanished"));
  // The caller's own abort then wins, as cc.h says: later calls return
  // CC_ERR_ABORTED (the peer's failure was told by the call before).
  CHECK(cc_comm_abort(comm) == CC_SUCCESS);
  CHECK(cc_barrier(comm, nullptr) == CC_ERR_ABORTED);
  CHECK_THAT(last(), Catch::Contains("aborted by cc_comm_abort"));
  CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
}

TEST_CASE("a mismatch no call returned yet is returned by destroy, once") {
  const std::string story =
      "graph replay #3: rank 1 (host b, pid 9) replayed a graph of 2 calls (the first "
      "cc_allreduce 1024 x FLOAT32 MAX), but rank 0 (host a, pid 8) replayed a graph of 2 calls";
  SECTION("found after the last call: destroy returns it") {
    cc_comm_t comm = fake_comm(0, 2);
    CHECK(cc::core::fail(*comm, cc::core::State::mismatch, story));
    CHECK(cc_comm_destroy(comm) == CC_ERR_MISMATCH);
    CHECK_THAT(last(), Catch::StartsWith("cc_comm_destroy on rank 0 (host testhost") &&
                           Catch::EndsWith(story));
  }
  SECTION("returned by a call: destroy is clean") {
    cc_comm_t comm = fake_comm(0, 2);
    CHECK(cc::core::fail(*comm, cc::core::State::mismatch, story));
    CHECK(cc_barrier(comm, nullptr) == CC_ERR_MISMATCH);
    CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
  }
  SECTION("another failure: destroy is clean") {
    cc_comm_t comm = fake_comm(0, 2);
    CHECK(cc::core::fail(*comm, cc::core::State::peer_failed, "rank 1 (host b, pid 9) vanished"));
    CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
  }
}

TEST_CASE("a destroyed communicator is detected, not used after free") {
  cc_comm_t comm = fake_comm(0, 2);
  CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
  CHECK(cc_allreduce(kBufA, kBufB, 1, CC_FLOAT32, CC_SUM, comm, nullptr) ==
        CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::StartsWith("cc_allreduce: comm was destroyed"));
  CHECK(cc_barrier(comm, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::Contains("comm was destroyed"));
  int v = 0;
  CHECK(cc_comm_rank(comm, &v) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_comm_abort(comm) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_comm_destroy(comm) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last(), Catch::StartsWith("cc_comm_destroy: comm was destroyed"));
}

// A captured call attaches a token to its graph (core::CapturedGraphs::note),
// which CUDA releases from its own thread when the graph is destroyed; here
// the test holds and releases it, as no GPU is visible.
TEST_CASE("destroy refuses while a captured graph lives, with the call check off too") {
  cc_comm_t comm = fake_comm(0, 2);
  comm->config.check_calls = false;  // CC_CHECK_CALLS=0: no call log, no graph replays
  REQUIRE(comm->graph_replays == nullptr);
  void* graph = comm->graphs.hold();
  REQUIRE(graph != nullptr);
  const auto start = std::chrono::steady_clock::now();
  CHECK(cc_comm_destroy(comm) == CC_ERR_INVALID_USAGE);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(900));
  CHECK_THAT(last(), Catch::StartsWith("cc_comm_destroy on rank 0 (host testhost): 1 CUDA "
                                       "graph(s) that captured this communicator's calls are "
                                       "still alive") &&
                         Catch::Contains("Destroy them first") &&
                         Catch::Contains("the communicator is untouched"));
  int rank = -1;
  CHECK(cc_comm_rank(comm, &rank) == CC_SUCCESS);  // untouched
  CHECK(rank == 0);
  // Released while destroy waits its second: destroy goes on.
  std::thread cuda([graph] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cc::core::CapturedGraphs::release(graph);
  });
  CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
  cuda.join();
  CHECK(cc_comm_destroy(comm) == CC_ERR_INVALID_ARGUMENT);  // really destroyed
}

TEST_CASE("an abort with a captured graph alive returns at once; destroy still waits for it") {
  cc_comm_t comm = fake_comm(1, 2);
  comm->config.check_calls = false;
  void* one = comm->graphs.hold();
  void* two = comm->graphs.hold();
  CHECK(comm->graphs.live() == 2);
  CHECK(cc_comm_abort(comm) == CC_SUCCESS);
  CHECK(cc_barrier(comm, nullptr) == CC_ERR_ABORTED);
  CHECK(cc_comm_destroy(comm) == CC_ERR_INVALID_USAGE);
  CHECK_THAT(last(), Catch::Contains(": 2 CUDA graph(s) that captured"));
  cc::core::CapturedGraphs::release(one);
  CHECK(cc_comm_destroy(comm) == CC_ERR_INVALID_USAGE);
  CHECK_THAT(last(), Catch::Contains(": 1 CUDA graph(s) that captured"));
  cc::core::CapturedGraphs::release(two);
  CHECK(comm->graphs.live() == 0);
  CHECK(cc_comm_destroy(comm) == CC_SUCCESS);
}

TEST_CASE("cc_group_end without cc_group_start is a usage error") {
  CHECK(cc_group_end() == CC_ERR_INVALID_USAGE);
  CHECK_THAT(last(), Catch::Contains("call cc_group_start first"));
}

TEST_CASE("datatype sizes and names") {
  using cc::datatype_name;
  using cc::datatype_size;
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int t = 0; t < CC_NUM_DATATYPES; ++t) {
    const auto dt = static_cast<cc_datatype_t>(t);
    INFO(datatype_name(dt));
    CHECK(datatype_size(dt) == sizes[t]);
    CHECK(std::string(datatype_name(dt)).rfind("CC_", 0) == 0);
  }
  CHECK(datatype_size(CC_NUM_DATATYPES) == 0);
  CHECK(std::string(datatype_name(CC_NUM_DATATYPES)) == "unknown");
  CHECK(std::string(cc::redop_name(CC_AVG)) == "CC_AVG");
}
