// The CUDA graphs that captured a communicator's calls and are not yet
// destroyed. NCCL holds a communicator until each of them is gone: its
// destroy and its abort wait for them without end. So at the
// communicator's first call in a capture, a CUDA user object goes into the
// graph, which counts the graph live until CUDA destroys it (the graph and
// every instance of it). The count is the communicator's own, with the call
// check on or off; cc_comm_destroy refuses while it is above 0.
// Cost: one driver query per call (cuStreamIsCapturing, 16 ns on an H100);
// a call that captures also asks for the graph, and the first one of a
// capture attaches the user object.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>

#include <cuda_runtime_api.h>

namespace cc::core {

// Whether a stream captures a CUDA graph, and which.
struct Capture {
  int state = 0;  // 1 captures, 0 does not, -1 CUDA could not say
  // CUDA's capture id (unique in the process) and the graph, while the
  // capture is active; 0 and null otherwise.
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
  // What the watchdog and the fast path must assume: an unknown state captures.
  bool captures() const { return state != 0; }
};

// On the calling thread, before a call is launched on `stream`: the driver's
// cheap question first, the runtime's capture info only when it captures.
Capture capture_of(cudaStream_t stream) noexcept;

class CapturedGraphs {
 public:
  CapturedGraphs() : live_(std::make_shared<std::atomic<int>>(0)) {}
  CapturedGraphs(const CapturedGraphs&) = delete;
  CapturedGraphs& operator=(const CapturedGraphs&) = delete;

  // Counts capture's graph at the communicator's first call in it (a no-op
  // for one seen already, or without a graph).
  void note(const Capture& capture) noexcept;
  // The graphs counted and not yet destroyed.
  int live() const noexcept { return live_->load(std::memory_order_acquire); }
  // The count itself, for what outlives the communicator.
  std::shared_ptr<const std::atomic<int>> count() const { return live_; }

  // Counts one graph live until release(token): what a graph's user object
  // does (note() makes one, CUDA releases it with the graph). Null when out
  // of memory (nothing counted). Tests call them directly.
  void* hold() noexcept;
  static void release(void* token) noexcept;

 private:
  // Shared with the tokens: a graph may outlive its communicator.
  std::shared_ptr<std::atomic<int>> live_;
  std::mutex mu_;
  // The captures counted last, by id. A capture pushed out by 8 newer ones
  // is counted again at its next call: its graph then counts twice, and
  // still reaches 0 when it is destroyed.
  static constexpr size_t kCaptures = 8;
  std::array<unsigned long long, kCaptures> seen_{};  // under mu_, as are the two below
  size_t seen_count_ = 0;
  bool warned_ = false;
};

}  // namespace cc::core
