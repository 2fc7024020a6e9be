// The fast paths on real GPUs, one process per rank (cc-run -n 2):
// cc_mem_alloc and registration, symmetric windows where the NCCL loaded has
// them, and collectives captured in a CUDA graph and replayed. Its own main:
// with no GPU it says why and exits 77 (skipped); every rank exits with the
// worst code of all.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cc/cc.h"

namespace {

cc_comm_t g_comm = nullptr;
int g_rank = -1, g_size = 0;
cudaStream_t g_stream = nullptr;

cc_stream_t ccs() { return reinterpret_cast<cc_stream_t>(g_stream); }
std::string words(cc_result_t r) { return std::string(cc_result_string(r)) + " — " + cc_last_error(); }

// Waits up to 120 s; on a hang aborts the comm so every rank fails fast.
bool sync_stream() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(g_stream);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) {
      std::fprintf(stderr, "rank %d: stream failed: %s\n", g_rank, cudaGetErrorString(e));
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "rank %d: no progress within 120 s; aborting\n", g_rank);
      cc_comm_abort(g_comm);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void upload(void* dst, const std::vector<float>& host) {
  REQUIRE(cudaMemcpyAsync(dst, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice,
                          g_stream) == cudaSuccess);
}

std::vector<float> download(const void* src, size_t n) {
  std::vector<float> host(n);
  REQUIRE(cudaMemcpyAsync(host.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost,
                          g_stream) == cudaSuccess);
  REQUIRE(sync_stream());
  return host;
}

// Rank r's element i in round k: small integers, so float sums are exact.
float input(int rank, size_t i, int k) {
  return static_cast<float>((rank + 1) * (k + 1) + static_cast<int>(i % 5));
}
float sum_over_ranks(size_t i, int k) {
  float s = 0;
  for (int r = 0; r < g_size; ++r) s += input(r, i, k);
  return s;
}
std::vector<float> inputs(size_t n, int k) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(g_rank, i, k);
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
  REQUIRE(cc_comm_device(g_comm, &device) == CC_SUCCESS);
  CHECK(attr.device == device);
  CHECK(cudaMemsetAsync(m.p, 0, 1 << 20, g_stream) == cudaSuccess);
  CHECK(sync_stream());
}

TEST_CASE("all-reduce from registered cc_mem_alloc buffers is correct") {
  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    INFO("count " << count);
    const size_t bytes = count * sizeof(float);
    CcMem send(bytes), recv(bytes);
    void* hs = nullptr;
    void* hr = nullptr;
    cc_result_t r = cc_comm_register(g_comm, send.p, bytes, &hs);
    INFO(words(r));
    REQUIRE(r == CC_SUCCESS);
    REQUIRE(cc_comm_register(g_comm, recv.p, bytes, &hr) == CC_SUCCESS);
    CHECK(hs != nullptr);
    CHECK(hr != nullptr);

    upload(send.p, inputs(count, 0));
    r = cc_allreduce(send.p, recv.p, count, CC_FLOAT32, CC_SUM, g_comm, ccs());
    REQUIRE(r == CC_SUCCESS);
    CHECK(wrong_sums(download(recv.p, count), 0) == 0);

    // In place, in the registered receive buffer.
    upload(recv.p, inputs(count, 1));
    REQUIRE(cc_allreduce(recv.p, recv.p, count, CC_FLOAT32, CC_SUM, g_comm, ccs()) == CC_SUCCESS);
    CHECK(wrong_sums(download(recv.p, count), 1) == 0);

    CHECK(cc_comm_deregister(g_comm, hs) == CC_SUCCESS);
    CHECK(cc_comm_deregister(g_comm, hr) == CC_SUCCESS);
  }
}

TEST_CASE("symmetric windows where the NCCL loaded has them") {
  const size_t count = size_t{1} << 18, bytes = count * sizeof(float);
  CcMem send(bytes), recv(bytes);
  void* ws = nullptr;
  void* wr = nullptr;
  cc_result_t r = cc_comm_window_register(g_comm, send.p, bytes, &ws);
  if (!nccl_has_windows()) {
    CHECK(r == CC_ERR_INVALID_USAGE);
    CHECK(std::string(cc_last_error()).find("need NCCL 2.27 or newer") != std::string::npos);
    return;
  }
  INFO(words(r));
  REQUIRE(r == CC_SUCCESS);
  REQUIRE(cc_comm_window_register(g_comm, recv.p, bytes, &wr) == CC_SUCCESS);
  CHECK(ws != nullptr);
  CHECK(wr != nullptr);
  for (size_t n : {size_t{1}, size_t{4096}, count}) {
    INFO("count " << n);
    upload(send.p, inputs(n, 2));
    REQUIRE(cc_allreduce(send.p, recv.p, n, CC_FLOAT32, CC_SUM, g_comm, ccs()) == CC_SUCCESS);
    CHECK(wrong_sums(download(recv.p, n), 2) == 0);
  }
  CHECK(cc_comm_window_deregister(g_comm, ws) == CC_SUCCESS);
  CHECK(cc_comm_window_deregister(g_comm, wr) == CC_SUCCESS);
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
  REQUIRE(cc_allreduce(send, recv, count, CC_FLOAT32, CC_SUM, g_comm, ccs()) == CC_SUCCESS);
  REQUIRE(cc_broadcast(recv, bcast, count, CC_FLOAT32, 0, g_comm, ccs()) == CC_SUCCESS);
  REQUIRE(sync_stream());

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  const cc_result_t r1 = cc_allreduce(send, recv, count, CC_FLOAT32, CC_SUM, g_comm, ccs());
  const cc_result_t r2 = cc_broadcast(recv, bcast, count, CC_FLOAT32, g_size - 1, g_comm, ccs());
  const cudaError_t end = cudaStreamEndCapture(g_stream, &graph);
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
    REQUIRE(cudaMemsetAsync(recv, 0xff, bytes, g_stream) == cudaSuccess);
    REQUIRE(cudaMemsetAsync(bcast, 0xff, bytes, g_stream) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(exec, g_stream) == cudaSuccess);
    wrong += wrong_sums(download(recv, count), k + 3);
    wrong_bcast += wrong_sums(download(bcast, count), k + 3);
  }
  CHECK(wrong == 0);
  CHECK(wrong_bcast == 0);
  // The comm still works directly after the replays.
  upload(send, inputs(count, 20));
  REQUIRE(cc_allreduce(send, recv, count, CC_FLOAT32, CC_SUM, g_comm, ccs()) == CC_SUCCESS);
  CHECK(wrong_sums(download(recv, count), 20) == 0);

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(send);
  cudaFree(recv);
  cudaFree(bcast);
}

int main(int argc, char** argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink SHARP is off on the machines we test on
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("gpu_fast_paths: skipped: no CUDA device is visible (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  cc_result_t r = cc_comm_init_from_env(&g_comm, nullptr);
  if (r == CC_ERR_NO_DEVICE) {
    std::printf("gpu_fast_paths: skipped: %s\n", cc_last_error());
    return 77;
  }
  if (r != CC_SUCCESS) {
    std::fprintf(stderr, "gpu_fast_paths: cc_comm_init_from_env: %s\n", words(r).c_str());
    return 1;
  }
  cc_comm_rank(g_comm, &g_rank);
  cc_comm_size(g_comm, &g_size);
  if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "rank %d: cudaStreamCreate failed\n", g_rank);
    return 1;
  }

  std::vector<char*> args(argv, argv + argc);
  std::string report_flag = "-r", reporter = "junit", out_flag = "-o", out_path;
  if (const char* dir = std::getenv("CC_TEST_REPORT_DIR"); dir != nullptr && *dir != '\0') {
    out_path = std::string(dir) + "/gpu_fast_paths.rank" + std::to_string(g_rank) + ".xml";
    args.insert(args.end(), {report_flag.data(), reporter.data(), out_flag.data(),
                             out_path.data()});
  }
  Catch::Session session;
  int failed = session.applyCommandLine(static_cast<int>(args.size()), args.data());
  if (failed == 0) failed = session.run();

  // Every rank returns the worst code of all.
  int code = failed != 0 ? 1 : 0;
  int* flag = nullptr;
  const bool agreed =
      cudaMalloc(reinterpret_cast<void**>(&flag), sizeof(int)) == cudaSuccess &&
      cudaMemcpy(flag, &code, sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess &&
      cc_allreduce(flag, flag, 1, CC_INT32, CC_MAX, g_comm, ccs()) == CC_SUCCESS &&
      sync_stream() && cudaMemcpy(&code, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
  if (!agreed) {
    std::fprintf(stderr, "rank %d: could not agree on the exit code: %s\n", g_rank,
                 cc_last_error());
    code = 1;
  }
  cudaFree(flag);
  cudaStreamDestroy(g_stream);
  if (r = cc_comm_destroy(g_comm); r != CC_SUCCESS) {
    std::fprintf(stderr, "rank %d: cc_comm_destroy: %s\n", g_rank, words(r).c_str());
    code = 1;
  }
  std::printf("gpu_fast_paths: rank %d of %d: %s\n", g_rank, g_size,
              code == 0 ? "all passed" : "FAILED");
  return code;
}
