#include "lib/watch/graph_replays.hpp"

#include <cuda.h>  // the driver's types, for its entry point (no link to libcuda)

#include "common/log.hpp"

namespace cc::watch {
namespace {

using IsCapturing = CUresult (*)(CUstream, CUstreamCaptureStatus*);

// The driver's cuStreamIsCapturing, found once through the runtime: a
// third of the runtime's cudaStreamGetCaptureInfo per call (16 against
// 52 ns on an H100), and every call with the check on asks it. Null where
// the runtime cannot name it.
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

// CUDA's host thread, at each replay: no CUDA call may be made here.
void replayed(void* data) {
  auto* g = static_cast<GraphReplays::Graph*>(data);
  uint64_t fingerprint = 0;
  CallDesc first{};
  int32_t calls = 0;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    fingerprint = g->fingerprint;
    first = g->first;
    calls = g->calls;
  }
  std::lock_guard<std::mutex> lock(g->sink->mu);
  if (g->sink->calls != nullptr) g->sink->calls->record_replay(fingerprint, first, calls);
}

// The graph let go of its user object (the graph, and every instance of it, destroyed).
void forget(void* data) {
  auto* g = static_cast<GraphReplays::Graph*>(data);
  g->sink->live_graphs.fetch_sub(1, std::memory_order_acq_rel);
  delete g;
}

}  // namespace

GraphReplays::GraphReplays(core::CallLog& calls) : sink_(std::make_shared<Sink>()) {
  sink_->calls = &calls;
  captures_.reserve(kCaptures + 1);
}

GraphReplays::~GraphReplays() { end(); }

void GraphReplays::end() noexcept {
  std::lock_guard<std::mutex> lock(sink_->mu);
  sink_->calls = nullptr;
}

void GraphReplays::warn_once(const char* what, cudaError_t e) noexcept {
  if (warned_) return;
  warned_ = true;
  log().warn("{} failed ({}): the replays of this CUDA graph are not compared across ranks", what,
             cudaGetErrorString(e));
}

int GraphReplays::note(cudaStream_t stream, const CallDesc& call) noexcept {
  // Most calls are not captured: the driver's cheaper question first.
  if (const IsCapturing is_capturing = driver_is_capturing(); is_capturing != nullptr) {
    CUstreamCaptureStatus now = CU_STREAM_CAPTURE_STATUS_NONE;
    if (is_capturing(reinterpret_cast<CUstream>(stream), &now) == CUDA_SUCCESS &&
        now == CU_STREAM_CAPTURE_STATUS_NONE)
      return 0;
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
    return -1;
  }
  if (status != cudaStreamCaptureStatusActive) return status == cudaStreamCaptureStatusNone ? 0 : 1;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [capture, g] : captures_) {
    if (capture != id) continue;
    if (g == nullptr) return 1;  // its node could not be added
    std::lock_guard<std::mutex> graph_lock(g->mu);
    g->fingerprint = fingerprint_step(g->fingerprint, call);
    g->calls += 1;
    return 1;
  }
  if (captures_.size() >= kCaptures) captures_.erase(captures_.begin());
  captures_.emplace_back(id, nullptr);
  auto made = std::make_unique<Graph>();
  made->sink = sink_;
  made->fingerprint = fingerprint_step(0, call);
  made->first = call;
  made->calls = 1;
  // The graph holds the data: its user object frees it with the graph.
  cudaUserObject_t object = nullptr;
  cudaError_t e = cudaUserObjectCreate(&object, made.get(), forget, 1,
                                       cudaUserObjectNoDestructorSync);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    warn_once("cudaUserObjectCreate", e);
    return 1;
  }
  Graph* g = made.release();
  sink_->live_graphs.fetch_add(1, std::memory_order_acq_rel);  // forget() counts it off
  e = cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    cudaUserObjectRelease(object, 1);  // frees g
    warn_once("cudaGraphRetainUserObject", e);
    return 1;
  }
  e = cudaLaunchHostFunc(stream, replayed, g);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    warn_once("cudaLaunchHostFunc", e);
    return 1;
  }
  captures_.back().second = g;
  return 1;
}

}  // namespace cc::watch
