// The multi-rank gpu test binary's main: every rank initialises the world
// communicator from the launcher's environment (cc-run, mpirun), runs the
// same Catch2 tests in the same order, and all ranks exit with one code.
// No GPU: says why and exits 77, which Meson counts as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/gpu_env.hpp"

namespace cc::test {
namespace {
cc_comm_t g_world = nullptr;
int g_rank = -1;
int g_size = 0;
cudaStream_t g_stream = nullptr;
}  // namespace

cc_comm_t world() { return g_world; }
int world_rank() { return g_rank; }
int world_size() { return g_size; }
cudaStream_t stream() { return g_stream; }
cc_stream_t cc_stream() { return reinterpret_cast<cc_stream_t>(g_stream); }

bool sync_stream(cudaStream_t s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) {
      std::fprintf(stderr, "rank %d: stream failed: %s\n", g_rank, cudaGetErrorString(e));
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "rank %d: a collective did not finish within 120 s; aborting\n", g_rank);
      cc_comm_abort(g_world);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::string describe(cc_result_t r) {
  return std::string(cc_result_string(r)) + " — " + cc_last_error();
}

bool call_and_wait(const std::string& what, cc_result_t r) {
  INFO(what << ": " << describe(r));
  CHECK(r == CC_SUCCESS);
  if (r != CC_SUCCESS) return false;
  const bool synced = sync_stream();
  CHECK(synced);
  return synced;
}

}  // namespace cc::test

int main(int argc, char** argv) {
  using namespace cc::test;
  const char* slash = std::strrchr(argv[0], '/');
  const std::string name = slash != nullptr ? slash + 1 : argv[0];
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink SHARP is off on the machines we test on
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("%s: skipped: no CUDA device is visible (%s)\n", name.c_str(),
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  cc_result_t r = cc_comm_init_from_env(&g_world, nullptr);
  if (r == CC_ERR_NO_DEVICE) {
    std::printf("%s: skipped: %s\n", name.c_str(), cc_last_error());
    return 77;
  }
  if (r != CC_SUCCESS) {
    std::fprintf(stderr, "%s: cc_comm_init_from_env: %s\n", name.c_str(), describe(r).c_str());
    return 1;
  }
  cc_comm_rank(g_world, &g_rank);
  cc_comm_size(g_world, &g_size);
  if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "rank %d: cudaStreamCreate failed\n", g_rank);
    return 1;
  }

  // A JUnit report per rank when CC_TEST_REPORT_DIR names a folder.
  std::vector<char*> args(argv, argv + argc);
  std::string report_flag = "-r", reporter = "junit", out_flag = "-o", out_path;
  if (const char* dir = std::getenv("CC_TEST_REPORT_DIR"); dir != nullptr && *dir != '\0') {
    out_path = std::string(dir) + "/" + name + ".rank" + std::to_string(g_rank) + ".xml";
    args.insert(args.end(),
                {report_flag.data(), reporter.data(), out_flag.data(), out_path.data()});
  }
  // Cases tagged [peers] cannot run on a communicator of one rank: they are
  // left out, not passed, unless the command line names the cases to run.
  std::string without_peers = "~[peers]";
  const bool names_cases =
      std::any_of(args.begin() + 1, args.end(), [](const char* a) { return a[0] != '-'; });
  if (g_size < 2 && !names_cases) {
    args.push_back(without_peers.data());
    if (g_rank == 0)
      std::printf("rank 0: one rank: the cases tagged [peers] are skipped (they need two ranks)\n");
  }
  Catch::Session session;
  int failed = session.applyCommandLine(static_cast<int>(args.size()), args.data());
  if (failed == 0) failed = session.run();

  // Every rank returns the same code: the worst of all.
  int exit_code = failed != 0 ? 1 : 0;
  {
    DeviceBuffer flag(sizeof(int));
    flag.upload(std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&exit_code),
                                     reinterpret_cast<uint8_t*>(&exit_code) + sizeof(int)));
    r = cc_allreduce(flag.get(), flag.get(), 1, CC_INT32, CC_MAX, g_world, cc_stream());
    if (r == CC_SUCCESS && sync_stream()) {
      auto host = flag.download(sizeof(int));
      std::memcpy(&exit_code, host.data(), sizeof(int));
    } else {
      std::fprintf(stderr, "rank %d: could not agree on the exit code: %s\n", g_rank,
                   describe(r).c_str());
      exit_code = 1;
    }
  }
  cudaStreamDestroy(g_stream);
  r = cc_comm_destroy(g_world);
  if (r != CC_SUCCESS) {
    std::fprintf(stderr, "rank %d: cc_comm_destroy: %s\n", g_rank, describe(r).c_str());
    exit_code = 1;
  }
  std::printf("rank %d of %d: %s\n", g_rank, g_size, exit_code == 0 ? "all passed" : "FAILED");
  return exit_code;
}
