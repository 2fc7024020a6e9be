#include "lib/core/graphs.hpp"

#include <new>

#include <cuda.h>  // the driver's types, for its entry point (no link to libcuda)

#include "common/log.hpp"

namespace cc::core {
namespace {

using IsCapturing = CUresult (*)(CUstream, CUstreamCaptureStatus*);

// The driver's cuStreamIsCapturing, found once through the runtime: a
// third of the runtime's cudaStreamGetCaptureInfo per call (16 against
// 52 ns on an H100), and every call asks it. Null where the runtime cannot
// name it.
IsCapturing driver_is_capturing() {
  static const IsCapturing found = [] {
#if CUDART_VERSION >= 12000
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuStreamIsCapturing", &fn, 10000,
                                                           cudaEnableDefault, &status);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuStreamIsCapturing", &fn, cudaEnableDefault,
                                                  &status);
#endif
    if (e != cudaSuccess || status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return IsCapturing{nullptr};
    }
    return reinterpret_cast<IsCapturing>(fn);
#else  // CUDA 11: the runtime's question alone
    return IsCapturing{nullptr};
#endif
  }();
  return found;
}

using Count = std::shared_ptr<std::atomic<int>>;

}  // namespace

Capture capture_of(cudaStream_t stream) noexcept {
  Capture c;
  // Most calls are not captured: the driver's cheaper question first.
  if (const IsCapturing is_capturing = driver_is_capturing(); is_capturing != nullptr) {
    CUstreamCaptureStatus now = CU_STREAM_CAPTURE_STATUS_NONE;
    if (is_capturing(reinterpret_cast<CUstream>(stream), &now) == CUDA_SUCCESS &&
        now == CU_STREAM_CAPTURE_STATUS_NONE)
      return c;
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
#if CUDART_VERSION >= 12000
  const cudaError_t asked = cudaStreamGetCaptureInfo(stream, &status, &id, &graph);
#else  // CUDA 11's spelling of the call that also names the graph
  const cudaError_t asked = cudaStreamGetCaptureInfo_v2(stream, &status, &id, &graph);
#endif
  if (asked != cudaSuccess) {
    (void)cudaGetLastError();
    c.state = -1;
    return c;
  }
  if (status == cudaStreamCaptureStatusNone) return c;
  c.state = 1;
  if (status == cudaStreamCaptureStatusActive) {  // an invalidated capture makes no graph
    c.id = id;
    c.graph = graph;
  }
  return c;
}

void* CapturedGraphs::hold() noexcept {
  auto* token = new (std::nothrow) Count(live_);
  if (token != nullptr) live_->fetch_add(1, std::memory_order_acq_rel);
  return token;
}

// CUDA's host thread, when the graph is destroyed: no CUDA call may be made here.
void CapturedGraphs::release(void* token) noexcept {
  auto* count = static_cast<Count*>(token);
  (*count)->fetch_sub(1, std::memory_order_acq_rel);
  delete count;
}

void CapturedGraphs::note(const Capture& capture) noexcept {
  if (capture.graph == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  const size_t known = seen_count_ < kCaptures ? seen_count_ : kCaptures;
  for (size_t i = 0; i < known; ++i)
    if (seen_[i] == capture.id) return;
  seen_[seen_count_ % kCaptures] = capture.id;
  ++seen_count_;
  const char* failed = nullptr;
  cudaError_t e = cudaSuccess;
  void* token = hold();
  if (token == nullptr) {
    failed = "counting it (out of memory)";
  } else {
    cudaUserObject_t object = nullptr;
    e = cudaUserObjectCreate(&object, token, release, 1, cudaUserObjectNoDestructorSync);
    if (e != cudaSuccess) {
      release(token);
      failed = "cudaUserObjectCreate";
    } else {
      // The graph takes the reference: CUDA releases the token with it.
      e = cudaGraphRetainUserObject(capture.graph, object, 1, cudaGraphUserObjectMove);
      if (e != cudaSuccess) {
        cudaUserObjectRelease(object, 1);  // releases the token
        failed = "cudaGraphRetainUserObject";
      }
    }
  }
  if (failed == nullptr) return;
  (void)cudaGetLastError();
  if (warned_) return;
  warned_ = true;
  log().warn("{} failed ({}) for a CUDA graph that captures a communicator's call: cc cannot "
             "tell whether it is alive, and NCCL's destroy of the communicator waits for it. "
             "Destroy the graph before the communicator",
             failed, e == cudaSuccess ? "no CUDA error" : cudaGetErrorString(e));
}

}  // namespace cc::core
