#include "lib/fast/calibrate.hpp"

#include <algorithm>
#include <thread>

#include <cuda_runtime_api.h>

namespace cc::fast {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmup = 3;
constexpr int kIters = 10;  // per timed run
constexpr int kRuns = 2;    // the faster run counts
constexpr double kBlocksTolerance = 1.03;

// The sizes measured: the floor (NCCL's latency) and then steps of x1.5 and
// x1.33 from 64 KiB to the largest size a kernel takes.
std::vector<size_t> sizes(const Capacity& cap) {
  const size_t top = std::max({cap.ll, cap.oneshot, cap.twoshot});
  std::vector<size_t> out{8};
  for (size_t s = 64 * 1024; s <= top; s *= 2) {
    out.push_back(s);
    if (s + s / 2 <= top) out.push_back(s + s / 2);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Bench {
  Channel* ch;
  ncclComm_t nccl;
  Clock::time_point deadline;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  int* token = nullptr;
  std::string* why;

  bool cuda(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    cudaGetLastError();
    *why = std::string(what) + " failed (" + cudaGetErrorString(e) + ")";
    return false;
  }
  bool nccl_ok(ncclResult_t r, const char* what) {
    if (r == ncclSuccess) return true;
    *why = std::string(what) + " failed (" + ncclGetErrorString(r) + ")";
    return false;
  }
  // Waits for the stream until the deadline.
  bool wait() {
    cudaError_t e;
    while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
      if (Clock::now() > deadline) {
        *why = "the measurement did not finish before the deadline (a rank stopped?)";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return cuda(e, "the measurement's stream");
  }
  bool call(Algo algo, size_t bytes, int blocks) {
    const size_t count = bytes / sizeof(float);
    if (algo == Algo::nccl)
      return nccl_ok(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, nccl, stream),
                     "ncclAllReduce");
    return cuda(allreduce_blocks(ch, algo, blocks, send, recv, count, ncclFloat32, ncclSum, stream),
                "launching cc's kernel");
  }
  // Mean microseconds per call; negative on failure.
  double time(Algo algo, size_t bytes, int blocks) {
    for (int i = 0; i < kWarmup; ++i)
      if (!call(algo, bytes, blocks)) return -1;
    double best = -1;
    for (int run = 0; run < kRuns; ++run) {
      // Every rank starts timing right after the same barrier.
      if (!nccl_ok(ncclAllReduce(token, token, 1, ncclInt32, ncclSum, nccl, stream), "barrier"))
        return -1;
      if (!cuda(cudaEventRecord(start, stream), "cudaEventRecord")) return -1;
      for (int i = 0; i < kIters; ++i)
        if (!call(algo, bytes, blocks)) return -1;
      if (!cuda(cudaEventRecord(stop, stream), "cudaEventRecord") || !wait()) return -1;
      float ms = 0;
      if (!cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime")) return -1;
      const double us = ms * 1000.0 / kIters;
      if (best < 0 || us < best) best = us;
    }
    return best;
  }
};

}  // namespace

bool measure(Channel* ch, ncclComm_t nccl, Clock::time_point deadline, Measurement* out,
             std::string* why) {
  const auto t0 = Clock::now();
  const Capacity cap = capacity(ch);
  const std::vector<size_t> points = sizes(cap);
  const size_t top = points.back();
  Bench b{ch, nccl, deadline, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, why};
  bool ok =
      b.cuda(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking), "cudaStreamCreate") &&
      b.cuda(cudaEventCreate(&b.start), "cudaEventCreate") &&
      b.cuda(cudaEventCreate(&b.stop), "cudaEventCreate") &&
      b.cuda(cudaMalloc(&b.send, top), "cudaMalloc") &&
      b.cuda(cudaMalloc(&b.recv, top), "cudaMalloc") &&
      b.cuda(cudaMalloc(reinterpret_cast<void**>(&b.token), sizeof(int)), "cudaMalloc") &&
      b.cuda(cudaMemsetAsync(b.send, 0x3c, top, b.stream), "cudaMemset") &&  // 0.0115f
      b.cuda(cudaMemsetAsync(b.token, 0, sizeof(int), b.stream), "cudaMemset");

  // The grid cap: the fewest blocks within a few percent of the fastest
  // one-shot at its largest size.
  // (Never more blocks than SMs: all of a kernel's blocks must be resident
  // at once, each waits for its counterpart on the peers.)
  int blocks = kDefaultBlocks, sms = 0, device = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (ok && cap.oneshot > 0) {
    double best = -1;
    std::vector<std::pair<int, double>> tried;
    for (int g : {16, 32, 64, 128}) {
      if (g > sms && g > 16) break;
      const double t = b.time(Algo::oneshot, cap.oneshot, g);
      if (t < 0) {
        ok = false;
        break;
      }
      tried.push_back({g, t});
      if (best < 0 || t < best) best = t;
    }
    for (auto [g, t] : tried)
      if (ok && t <= best * kBlocksTolerance) {
        blocks = g;
        break;
      }
  }

  std::vector<double> flat;
  for (size_t i = 0; ok && i < points.size(); ++i) {
    Sample s;
    s.bytes = points[i];
    for (int a = 0; a < kAlgos && ok; ++a) {
      const Algo algo = static_cast<Algo>(a);
      if (algo != Algo::nccl && (i == 0 || cap.of(algo) < s.bytes)) continue;
      s.us[a] = b.time(algo, s.bytes, blocks);
      ok = s.us[a] >= 0;
    }
    out->samples.push_back(s);
    flat.insert(flat.end(), s.us, s.us + kAlgos);
  }

  // The slowest rank's times, so that every rank decides alike.
  double* dev = nullptr;
  if (ok) {
    ok = b.cuda(cudaMalloc(reinterpret_cast<void**>(&dev), flat.size() * sizeof(double)),
                "cudaMalloc") &&
         b.cuda(cudaMemcpyAsync(dev, flat.data(), flat.size() * sizeof(double),
                                cudaMemcpyHostToDevice, b.stream),
                "cudaMemcpy") &&
         b.nccl_ok(ncclAllReduce(dev, dev, flat.size(), ncclFloat64, ncclMax, nccl, b.stream),
                   "ncclAllReduce of the timings") &&
         b.cuda(cudaMemcpyAsync(flat.data(), dev, flat.size() * sizeof(double),
                                cudaMemcpyDeviceToHost, b.stream),
                "cudaMemcpy") &&
         b.wait();
  }
  if (ok)
    for (size_t i = 0; i < out->samples.size(); ++i)
      std::copy(flat.begin() + static_cast<long>(i * kAlgos),
                flat.begin() + static_cast<long>((i + 1) * kAlgos), out->samples[i].us);

  // After a failure a peer may wait in a kernel or in NCCL for this rank:
  // the kernels are told to give up, the caller aborts NCCL, and the
  // buffers are left to the process.
  if (!ok) request_abort(ch);
  if (ok) {
    cudaStreamSynchronize(b.stream);
    cudaFree(dev);
    cudaFree(b.send);
    cudaFree(b.recv);
    cudaFree(b.token);
    cudaEventDestroy(b.start);
    cudaEventDestroy(b.stop);
    cudaStreamDestroy(b.stream);
  }
  cudaGetLastError();
  out->blocks = blocks;
  out->ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return ok;
}

}  // namespace cc::fast
