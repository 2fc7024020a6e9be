// The ranks of cc's all-reduce kernels as streams of one process on one GPU:
// each rank has its own channel (peer buffer, device state, abort flag) and
// two streams, and reaches the others' buffers directly. Enough to run the
// kernels' whole protocol where only one GPU is, and with more ranks than the
// machine has GPUs; how fast they are over NVLink needs the real thing.
//
// Every rank's kernel must be resident at once for their waits to end, so
// a rank gets at most 1/n of the GPU's SMs (blocks_per_rank()).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "lib/fast/channel.hpp"
#include "tests/gpu/device_memory.hpp"

namespace cc::test {

class OneGpuRanks {
 public:
  // Sets up `nranks` channels on the current device; throws
  // std::runtime_error with the channel's error message when it cannot.
  explicit OneGpuRanks(int nranks);
  ~OneGpuRanks();
  OneGpuRanks(const OneGpuRanks&) = delete;
  OneGpuRanks& operator=(const OneGpuRanks&) = delete;

  int size() const { return static_cast<int>(channels_.size()); }
  // Thread blocks one-shot and two-shot get (the plan's cap), and the
  // largest LL message whose grid still leaves room for every rank's.
  int blocks_per_rank() const { return blocks_; }
  size_t ll_max_bytes() const;
  fast::Capacity capacity() const { return fast::capacity(channels_[0]); }

  fast::Channel* channel(int r) const { return channels_[static_cast<size_t>(r)]; }
  cudaStream_t stream(int r, int which = 0) const {
    return streams_[static_cast<size_t>(r) * 2 + static_cast<size_t>(which)];
  }

  // Enqueues rank r's all-reduce on `s` (default: its first stream), as
  // cc_allreduce does: fast::allreduce, then fast::launched.
  cudaError_t allreduce(int r, fast::Algo algo, const void* send, void* recv, size_t count,
                        ncclDataType_t type, ncclRedOp_t op, cudaStream_t s = nullptr,
                        bool capturing = false);

  // Waits for every stream up to `limit`; past it, raises every rank's abort
  // flag (the kernels then give up), waits for them and returns false.
  bool finish(std::chrono::milliseconds limit = std::chrono::seconds(60));

  // Raises every rank's abort flag, as cc_comm_abort and the watchdog do.
  void abort();

  // Whether every stream is idle now (no kernel still waiting).
  bool idle() const;

  // A device buffer of `bytes`, kept until release_buffers() or the end:
  // owned here, so none is freed (cudaFree waits for the device) while a
  // kernel still waits.
  DeviceMemory& buffer(size_t bytes);
  // Frees the buffers, once every stream is idle (finish() returned).
  void release_buffers();

 private:
  std::vector<std::unique_ptr<DeviceMemory>> buffers_;
  std::vector<fast::Channel*> channels_;
  std::vector<cudaStream_t> streams_;
  int blocks_ = 0;
  int sms_ = 0;
};

}  // namespace cc::test
