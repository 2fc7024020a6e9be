#include "lib/watch/graph_replays.hpp"

#include "common/log.hpp"

namespace cc::watch {
namespace {

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
void forget(void* data) { delete static_cast<GraphReplays::Graph*>(data); }

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

void GraphReplays::note(cudaStream_t stream, const core::Capture& capture,
                        const CallDesc& call) noexcept {
  if (capture.graph == nullptr) return;
  const unsigned long long id = capture.id;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [seen, g] : captures_) {
    if (seen != id) continue;
    if (g == nullptr) return;  // its node could not be added
    std::lock_guard<std::mutex> graph_lock(g->mu);
    g->fingerprint = fingerprint_step(g->fingerprint, call);
    g->calls += 1;
    return;
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
    return;
  }
  Graph* g = made.release();
  e = cudaGraphRetainUserObject(capture.graph, object, 1, cudaGraphUserObjectMove);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    cudaUserObjectRelease(object, 1);  // frees g
    warn_once("cudaGraphRetainUserObject", e);
    return;
  }
  e = cudaLaunchHostFunc(stream, replayed, g);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    warn_once("cudaLaunchHostFunc", e);
    return;
  }
  captures_.back().second = g;
}

}  // namespace cc::watch
