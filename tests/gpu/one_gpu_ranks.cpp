#include "tests/gpu/one_gpu_ranks.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <cuda_runtime.h>

namespace cc::test {

OneGpuRanks::OneGpuRanks(int nranks) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute");
  std::string why;
  if (!fast::locally_possible(nranks, device, &why))
    throw std::runtime_error("cc's kernels cannot run here: " + why);
  // Every rank's grid must be resident together: a 1/n share of the SMs
  // (even: one-shot splits its grid in two halves).
  blocks_ = std::clamp((sms_ / nranks) & ~1, 2, fast::kMaxBlocks);

  std::vector<fast::PeerRecord> records(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    fast::Channel* ch =
        fast::prepare(r, nranks, device, "one-gpu", &records[static_cast<size_t>(r)]);
    if (ch == nullptr)
      throw std::runtime_error("rank " + std::to_string(r) + ": " +
                               records[static_cast<size_t>(r)].why);
    channels_.push_back(ch);
  }
  fast::Plan plan;
  plan.blocks = blocks_;
  for (fast::Channel* ch : channels_) {
    if (!fast::connect(ch, records, &why)) throw std::runtime_error("connect: " + why);
    fast::set_plan(ch, plan);
  }
  for (int i = 0; i < 2 * nranks; ++i) {
    cudaStream_t s = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    streams_.push_back(s);
  }
}

OneGpuRanks::~OneGpuRanks() {
  finish(std::chrono::seconds(10));
  buffers_.clear();
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
  for (fast::Channel* ch : channels_) fast::close_peers(ch);
  for (fast::Channel* ch : channels_) fast::destroy(ch);
  cudaGetLastError();
}

size_t OneGpuRanks::ll_max_bytes() const {
  const size_t fits = static_cast<size_t>(sms_ / size()) * fast::kThreads * 8;
  return std::min(fits, capacity().ll);
}

cudaError_t OneGpuRanks::allreduce(int r, fast::Algo algo, const void* send, void* recv,
                                   size_t count, ncclDataType_t type, ncclRedOp_t op,
                                   cudaStream_t s, bool capturing) {
  if (s == nullptr) s = stream(r);
  fast::Channel* ch = channel(r);
  const cudaError_t e = fast::allreduce(ch, algo, send, recv, count, type, op, s, capturing);
  if (e == cudaSuccess) fast::launched(ch, s, capturing, nullptr);
  return e;
}

bool OneGpuRanks::idle() const {
  for (cudaStream_t s : streams_)
    if (cudaStreamQuery(s) == cudaErrorNotReady) return false;
  return true;
}

bool OneGpuRanks::finish(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!idle()) {
    if (std::chrono::steady_clock::now() > until) {
      abort();
      for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
      cudaGetLastError();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  bool ok = true;
  for (cudaStream_t s : streams_) ok = cudaStreamQuery(s) == cudaSuccess && ok;
  cudaGetLastError();
  return ok;
}

DeviceMemory& OneGpuRanks::buffer(size_t bytes) {
  // Copies on the legacy default stream: synchronous with every rank's streams.
  buffers_.push_back(std::make_unique<DeviceMemory>(bytes, nullptr));
  return *buffers_.back();
}

void OneGpuRanks::release_buffers() {
  if (idle()) buffers_.clear();
}

void OneGpuRanks::abort() {
  for (fast::Channel* ch : channels_) fast::request_abort(ch);
}

}  // namespace cc::test
