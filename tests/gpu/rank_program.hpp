// What the one-rank programs started by the gpu failure and recovery scripts
// (gpu_failures, gpu_recovery) share: their clock and words on stdout, the
// environment's numbers, a bounded wait for a stream, device buffers.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

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

// The words of a failed cc call.
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

}  // namespace cc::test
