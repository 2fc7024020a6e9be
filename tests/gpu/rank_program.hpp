// What the one-rank programs started by the gpu failure and recovery scripts
// (gpu_failures, gpu_recovery) share: their clock and messages on stdout, the
// environment's numbers, a bounded wait for a stream, device buffers, the
// communicator's device and stream, the choice of a mode by name, and the
// main() of a program of modes.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "cc/cc.h"

namespace cc::test {

// CLOCK_REALTIME in ns, so a script can compare it with its own.
inline long long realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// Prints "SKIP no CUDA device here" when there is none (the program then
// exits 77, skipped).
inline bool no_cuda_device() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices >= 1) return false;
  std::printf("SKIP no CUDA device here\n");
  return true;
}

// Prints "FAIL <why>"; the program's exit status.
inline int fail(const std::string& why) {
  std::printf("FAIL %s\n", why.c_str());
  std::fflush(stdout);
  return 1;
}

inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// The message of a failed cc call.
inline std::string words(cc_result_t r) {
  return std::string(cc_result_string(r)) + ": " + cc_last_error();
}

// Waits for the stream, polling every 100 us, up to `limit`; the watchdog's
// abort is what releases a stream stuck on a dead peer.
inline bool wait_stream(cudaStream_t s, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e != cudaErrorNotReady) {
      cudaGetLastError();
      return true;
    }
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// `count` floats to send (zeroed) and `count` to receive, on the device.
struct Buffers {
  float* send = nullptr;
  float* recv = nullptr;
  size_t count;
  explicit Buffers(size_t n) : count(n) {
    cudaMalloc(reinterpret_cast<void**>(&send), n * sizeof(float));
    cudaMalloc(reinterpret_cast<void**>(&recv), n * sizeof(float));
    cudaMemset(send, 0, n * sizeof(float));
  }
  ~Buffers() {
    cudaFree(send);
    cudaFree(recv);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
};

// Makes the communicator's device the current one; a non-blocking stream on it.
inline cudaStream_t stream_on_device(cc_comm_t comm) {
  int device = 0;
  cc_comm_device(comm, &device);
  cudaSetDevice(device);
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  return s;
}

// A program's modes: each name with what it runs (communicator, rank, stream),
// returning the exit status.
using Modes = std::vector<std::pair<std::string, std::function<int(cc_comm_t, int, cudaStream_t)>>>;

// Runs the mode named `mode` on the communicator's device (or fails with
// "unknown mode '<mode>'"), then destroys the communicator and the stream.
// The program's exit status.
inline int run_mode(const std::string& mode, const Modes& modes, cc_comm_t comm, int rank) {
  cudaStream_t s = stream_on_device(comm);
  int rc = 2;
  bool found = false;
  for (const auto& [name, run] : modes)
    if (name == mode) {
      rc = run(comm, rank, s);
      found = true;
      break;
    }
  if (!found) rc = fail("unknown mode '" + mode + "'");
  cc_comm_destroy(comm);
  cudaStreamDestroy(s);
  return rc;
}

// main() of a program whose modes each run on a communicator made from the
// environment: mode "probe" only looks for a GPU (exit 0, or 77 without
// one); any other is run by run_mode after cc_comm_init_from_env.
inline int run_rank_program(const std::string& mode, const Modes& modes) {
  if (no_cuda_device()) return 77;
  if (mode == "probe") return 0;
  cc_comm_t comm = nullptr;
  if (cc_result_t r = cc_comm_init_from_env(&comm, nullptr); r != CC_SUCCESS)
    return fail("init: " + words(r));
  int rank = 0;
  cc_comm_rank(comm, &rank);
  return run_mode(mode, modes, comm, rank);
}

}  // namespace cc::test
