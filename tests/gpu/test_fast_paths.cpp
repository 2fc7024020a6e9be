// The fast paths on real GPUs, one process per rank (cc-run -n 2):
// cc_mem_alloc and registration, symmetric windows where the NCCL loaded has
// them, and collectives captured in a CUDA graph and replayed. The main is
// gpu_main.cpp's (no GPU: exit 77; every rank exits with the worst code).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cc/cc.h"
#include "tests/gpu/gpu_env.hpp"

namespace {

using namespace cc::test;

cc_stream_t ccs() { return cc_stream(); }
std::string words(cc_result_t r) { return describe(r); }

void upload(void* dst, const std::vector<float>& host) {
  REQUIRE(cudaMemcpyAsync(dst, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice,
                          stream()) == cudaSuccess);
}

std::vector<float> download(const void* src, size_t n) {
  std::vector<float> host(n);
  REQUIRE(cudaMemcpyAsync(host.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost, stream()) ==
          cudaSuccess);
  REQUIRE(sync_stream());
  return host;
}

// Rank r's element i in round k: small integers, so float sums are exact.
float input(int rank, size_t i, int k) {
  return static_cast<float>((rank + 1) * (k + 1) + static_cast<int>(i % 5));
}
float sum_over_ranks(size_t i, int k) {
  float s = 0;
  for (int r = 0; r < world_size(); ++r) s += input(r, i, k);
  return s;
}
std::vector<float> inputs(size_t n, int k) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(world_rank(), i, k);
  return v;
}

// Number of elements of an all-reduce result that are wrong.
size_t wrong_sums(const std::vector<float>& got, int k) {
  size_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != sum_over_ranks(i, k)) ++wrong;
  return wrong;
}

// cc_mem_alloc'd memory, freed on scope exit.
struct CcMem {
  void* p = nullptr;
  explicit CcMem(size_t bytes) {
    const cc_result_t r = cc_mem_alloc(&p, bytes);
    INFO(words(r));
    REQUIRE(r == CC_SUCCESS);
    REQUIRE(p != nullptr);
  }
  ~CcMem() { cc_mem_free(p); }
  CcMem(const CcMem&) = delete;
  CcMem& operator=(const CcMem&) = delete;
};

// All-reduces n floats of round k from `send` into `recv` (which may be
// `send`) and CHECKs every sum.
void check_allreduce(void* send, void* recv, size_t n, int k) {
  upload(send, inputs(n, k));
  REQUIRE(cc_allreduce(send, recv, n, CC_FLOAT32, CC_SUM, world(), ccs()) == CC_SUCCESS);
  CHECK(wrong_sums(download(recv, n), k) == 0);
}

bool nccl_has_windows() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess && v >= 22700;
}

}  // namespace

TEST_CASE("cc_mem_alloc gives device memory of the comm's device") {
  CcMem m(1 << 20);
  cudaPointerAttributes attr{};
  REQUIRE(cudaPointerGetAttributes(&attr, m.p) == cudaSuccess);
  CHECK(attr.type == cudaMemoryTypeDevice);
  int device = -1;
  REQUIRE(cc_comm_device(world(), &device) == CC_SUCCESS);
  CHECK(attr.device == device);
  CHECK(cudaMemsetAsync(m.p, 0, 1 << 20, stream()) == cudaSuccess);
  CHECK(sync_stream());
}

TEST_CASE("all-reduce from registered cc_mem_alloc buffers is correct") {
  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    INFO("count " << count);
    const size_t bytes = count * sizeof(float);
    CcMem send(bytes), recv(bytes);
    void* hs = nullptr;
    void* hr = nullptr;
    cc_result_t r = cc_comm_register(world(), send.p, bytes, &hs);
    INFO(words(r));
    REQUIRE(r == CC_SUCCESS);
    REQUIRE(cc_comm_register(world(), recv.p, bytes, &hr) == CC_SUCCESS);
    CHECK(hs != nullptr);
    CHECK(hr != nullptr);

    check_allreduce(send.p, recv.p, count, 0);
    // In place, in the registered receive buffer.
    check_allreduce(recv.p, recv.p, count, 1);

    CHECK(cc_comm_deregister(world(), hs) == CC_SUCCESS);
    CHECK(cc_comm_deregister(world(), hr) == CC_SUCCESS);
  }
}

TEST_CASE("symmetric windows where the NCCL loaded has them") {
  const size_t count = size_t{1} << 18, bytes = count * sizeof(float);
  CcMem send(bytes), recv(bytes);
  void* ws = nullptr;
  void* wr = nullptr;
  cc_result_t r = cc_comm_window_register(world(), send.p, bytes, &ws);
  if (!nccl_has_windows()) {
    CHECK(r == CC_ERR_INVALID_USAGE);
    CHECK(std::string(cc_last_error()).find("need NCCL 2.27 or newer") != std::string::npos);
    return;
  }
  INFO(words(r));
  REQUIRE(r == CC_SUCCESS);
  REQUIRE(cc_comm_window_register(world(), recv.p, bytes, &wr) == CC_SUCCESS);
  CHECK(ws != nullptr);
  CHECK(wr != nullptr);
  for (size_t n : {size_t{1}, size_t{4096}, count}) {
    INFO("count " << n);
    check_allreduce(send.p, recv.p, n, 2);
  }
  CHECK(cc_comm_window_deregister(world(), ws) == CC_SUCCESS);
  CHECK(cc_comm_window_deregister(world(), wr) == CC_SUCCESS);
}

TEST_CASE("collectives captured in a CUDA graph replay correctly ten times") {
  const size_t count = 4096, bytes = count * sizeof(float);
  void* send = nullptr;
  void* recv = nullptr;
  void* bcast = nullptr;
  REQUIRE(cudaMalloc(&send, bytes) == cudaSuccess);
  REQUIRE(cudaMalloc(&recv, bytes) == cudaSuccess);
  REQUIRE(cudaMalloc(&bcast, bytes) == cudaSuccess);
  // Warm the communicator's connections outside the capture.
  upload(send, inputs(count, 0));
  REQUIRE(cc_allreduce(send, recv, count, CC_FLOAT32, CC_SUM, world(), ccs()) == CC_SUCCESS);
  REQUIRE(cc_broadcast(recv, bcast, count, CC_FLOAT32, 0, world(), ccs()) == CC_SUCCESS);
  REQUIRE(sync_stream());

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  const cc_result_t r1 = cc_allreduce(send, recv, count, CC_FLOAT32, CC_SUM, world(), ccs());
  const cc_result_t r2 =
      cc_broadcast(recv, bcast, count, CC_FLOAT32, world_size() - 1, world(), ccs());
  const cudaError_t end = cudaStreamEndCapture(stream(), &graph);
  INFO(words(r1 != CC_SUCCESS ? r1 : r2));
  REQUIRE(r1 == CC_SUCCESS);
  REQUIRE(r2 == CC_SUCCESS);
  REQUIRE(end == cudaSuccess);
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);

  size_t wrong = 0, wrong_bcast = 0;
  for (int k = 0; k < 10; ++k) {
    // New inputs every round (ordered before the replay on the same stream),
    // so a replay that did nothing cannot pass.
    upload(send, inputs(count, k + 3));
    REQUIRE(cudaMemsetAsync(recv, 0xff, bytes, stream()) == cudaSuccess);
    REQUIRE(cudaMemsetAsync(bcast, 0xff, bytes, stream()) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(exec, stream()) == cudaSuccess);
    wrong += wrong_sums(download(recv, count), k + 3);
    wrong_bcast += wrong_sums(download(bcast, count), k + 3);
  }
  CHECK(wrong == 0);
  CHECK(wrong_bcast == 0);
  // The comm still works directly after the replays.
  check_allreduce(send, recv, count, 20);

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(send);
  cudaFree(recv);
  cudaFree(bcast);
}

// torch.cuda.graph captures in global mode: any thread's unsafe CUDA call
// during the capture is refused and invalidates it. cc's watchdog queries
// events on its own thread, so a capture that lasts several watchdog ticks
// right after an eager call (whose event the watchdog still has to query)
// must come out intact, and the communicator must not blame a kernel.
TEST_CASE("a global-mode graph capture survives the watchdog's ticks") {
  const size_t count = 4096;
  const size_t bytes = count * sizeof(float);
  void* send = nullptr;
  void* recv = nullptr;
  REQUIRE(cudaMalloc(&send, bytes) == cudaSuccess);
  REQUIRE(cudaMalloc(&recv, bytes) == cudaSuccess);
  upload(send, inputs(count, 1));
  REQUIRE(sync_stream());

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  // Eager, not waited for: the watchdog has an event to query during the capture.
  REQUIRE(cc_allreduce(send, recv, count, CC_FLOAT32, CC_SUM, world(), ccs()) == CC_SUCCESS);
  REQUIRE(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal) == cudaSuccess);
  const cc_result_t r = cc_allreduce(send, recv, count, CC_FLOAT32, CC_SUM, world(), ccs());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // ten watchdog ticks
  const cudaError_t end = cudaStreamEndCapture(stream(), &graph);
  INFO(words(r));
  REQUIRE(r == CC_SUCCESS);
  REQUIRE(end == cudaSuccess);
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  upload(send, inputs(count, 4));
  REQUIRE(cudaMemsetAsync(recv, 0xff, bytes, stream()) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, stream()) == cudaSuccess);
  CHECK(wrong_sums(download(recv, count), 4) == 0);
  // The communicator was not declared failed meanwhile.
  REQUIRE(cc_allreduce(send, recv, count, CC_FLOAT32, CC_SUM, world(), ccs()) == CC_SUCCESS);
  CHECK(wrong_sums(download(recv, count), 4) == 0);

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(send);
  cudaFree(recv);
}
