// The replays of CUDA graphs that captured a communicator's calls, counted
// on the call log's replay line (lib/core/call_log.hpp). Calls captured
// into a graph are compared once, as they are captured; a graph runs them
// again at every replay, which cc never sees. So at the communicator's
// first call captured into a graph, one host node goes into the graph ahead
// of it (cudaLaunchHostFunc on the capturing stream): CUDA runs it at every
// replay, as the GPU reaches it, and it records one point: the replay's
// number and the fingerprint of all the communicator's calls that graph
// captured (complete by then: a graph replays once its capture has ended).
// The node's data lives as long as the graph does (a CUDA user object the
// graph holds), and records nothing once the communicator is destroyed.
// Cost: one host node per captured graph per replay, where the stream waits
// for CUDA's host thread to run a callback.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "common/call_desc.hpp"
#include "lib/core/call_log.hpp"
#include "lib/core/graphs.hpp"

namespace cc::watch {

class GraphReplays {
 public:
  explicit GraphReplays(core::CallLog& calls);
  ~GraphReplays();  // end()
  GraphReplays(const GraphReplays&) = delete;
  GraphReplays& operator=(const GraphReplays&) = delete;

  // On the calling thread, before `call` is launched on `stream`, which
  // captures (`capture`, core::capture_of): adds the graph's host node at
  // its first call of this communicator, and the call to the graph's
  // fingerprint. A no-op for a capture without a graph.
  void note(cudaStream_t stream, const core::Capture& capture, const CallDesc& call) noexcept;
  // The communicator is destroyed: later replays record nothing.
  void end() noexcept;

  // Shared by every graph the communicator captured; its call log while the
  // communicator lives.
  struct Sink {
    std::mutex mu;
    core::CallLog* calls = nullptr;  // under mu
  };
  // One captured graph's calls of this communicator, owned by the graph.
  struct Graph {
    std::shared_ptr<Sink> sink;
    std::mutex mu;
    uint64_t fingerprint = 0;  // under mu, as are the two below
    CallDesc first{};
    int32_t calls = 0;
  };

 private:
  void warn_once(const char* what, cudaError_t e) noexcept;

  std::shared_ptr<Sink> sink_;
  std::mutex mu_;
  // The captures seen last, by CUDA's capture id (unique in the process):
  // their Graph lives while the capture goes on.
  static constexpr size_t kCaptures = 8;
  std::vector<std::pair<unsigned long long, Graph*>> captures_;
  bool warned_ = false;
};

}  // namespace cc::watch
