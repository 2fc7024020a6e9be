// What the watchdog watches on one communicator: its control channel (peer
// events, heartbeats carrying the last completed op), NCCL's asynchronous
// errors on both NCCL communicators, a split child's parent, and the age of
// the operations in flight.
//
// In-flight tracking costs the hot path a few relaxed stores: one CUDA event
// per communicator is recorded on the caller's stream only when the previous
// one has completed (the watchdog marks it free), so a loop of small
// all-reduces records about one event per watchdog tick, not one per call.
// When the caller stops calling, the watchdog records the event itself on the
// stream of the last call, so the last operation is always covered.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <cuda_runtime_api.h>

#include "cc/cc.h"
#include "common/status.hpp"
#include "lib/core/core.hpp"
#include "lib/watch/control_channel.hpp"
#include "lib/watch/flight_recorder.hpp"
#include "lib/watch/split_report.hpp"
#include "lib/watch/watchdog.hpp"

namespace cc::watch {

class CommWatch final : public Watched {
 public:
  // `channel` is null for a communicator made by split (no connection of its own).
  static Status create(core::Core* comm, std::unique_ptr<ControlChannel> channel,
                       std::unique_ptr<CommWatch>* out);
  ~CommWatch() override;
  CommWatch(const CommWatch&) = delete;
  CommWatch& operator=(const CommWatch&) = delete;

  // Hot path, on the calling thread after NCCL took operation `seq`.
  // `track`: false inside cc_group_start/end (nothing launched yet).
  // `capturing`: whether `stream` captures a graph (or CUDA could not say),
  // as the call asked once (core::capture_of). Returns the event recorded on
  // `stream` after the operation, or null when none was (captured,
  // untracked, contended).
  cudaEvent_t note(uint64_t seq, const char* call, size_t count, cc_datatype_t dtype,
                   cudaStream_t stream, bool track, bool capturing) noexcept {
    OpRecord& r = ops_[seq % kOps];
    r.call.store(call, std::memory_order_relaxed);
    r.count.store(count, std::memory_order_relaxed);
    r.dtype.store(static_cast<int>(dtype), std::memory_order_relaxed);
    r.seq.store(seq, std::memory_order_release);
    if (!track) return nullptr;
    int idle = kIdle;
    if (event_state_.load(std::memory_order_relaxed) != kIdle ||
        !event_state_.compare_exchange_strong(idle, kBusy, std::memory_order_acquire))
      return note_tail(seq, stream, capturing);
    // Work captured into a CUDA graph runs later, at launch: not tracked.
    if (capturing) {
      event_state_.store(kIdle, std::memory_order_release);
      return nullptr;
    }
    if (cudaEventRecord(event_, stream) == cudaSuccess) {
      event_seq_ = seq;
      event_state_.store(kPending, std::memory_order_release);
      return event_;
    }
    (void)cudaGetLastError();
    event_state_.store(kIdle, std::memory_order_release);
    return nullptr;
  }

  void watch_tick(std::chrono::steady_clock::time_point now) override;

  // While `event_` tracks an older operation, the newest one goes to the
  // tail event (re-recorded by every such call, on the caller's thread while
  // its stream surely exists); the watchdog never touches a stream itself,
  // so a stream destroyed after its work finished is no hazard.
  cudaEvent_t note_tail(uint64_t seq, cudaStream_t stream, bool capturing) noexcept {
    int idle = kIdle;
    if (!tail_state_.compare_exchange_strong(idle, kBusy, std::memory_order_acquire))
      return nullptr;
    cudaEvent_t recorded = nullptr;
    if (!capturing && cudaEventRecord(tail_event_, stream) == cudaSuccess) {
      tail_seq_.store(seq, std::memory_order_relaxed);
      recorded = tail_event_;
    } else {
      (void)cudaGetLastError();
    }
    tail_state_.store(kIdle, std::memory_order_release);
    return recorded;
  }

  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  ControlChannel* channel() { return channel_.get(); }
  // The flight recorder it marks completions in and writes on a failure and
  // on SIGUSR1 (owned by the communicator; set before the watchdog sees it).
  void set_recorder(FlightRecorder* recorder) { recorder_ = recorder; }
  // A parent: the line of a child split from it, ticked with the parent's
  // channel. A child: its own line (set once, before the watchdog sees it);
  // end_split() when the child stops, before its recorder goes.
  void add_split(std::shared_ptr<SplitReport> child);
  void set_split(std::shared_ptr<SplitReport> own) { split_ = std::move(own); }
  void end_split();

 private:
  static constexpr int kIdle = 0, kBusy = 1, kPending = 2;
  static constexpr uint64_t kOps = 64;
  struct OpRecord {
    std::atomic<uint64_t> seq{0};
    std::atomic<const char*> call{nullptr};
    std::atomic<size_t> count{0};
    std::atomic<int> dtype{0};
  };
  struct Failure;

  CommWatch(core::Core* comm, cudaEvent_t event, cudaEvent_t tail_event,
            std::unique_ptr<ControlChannel> channel);
  bool check_inflight(std::chrono::steady_clock::time_point now, Failure* f);
  bool cuda_fault(cudaError_t e, uint64_t seq, Failure* f);
  bool check_nccl(Failure* f);
  void write_recorder(const char* reason);
  void write_failure_trace();
  std::string op_words(uint64_t seq) const;
  std::string timeout_story(uint64_t waiting);
  std::string progress_words() const;

  void tick_splits(std::chrono::steady_clock::time_point now);
  std::optional<ChannelFailure> split_failure();

  core::Core* comm_;
  std::mutex splits_mu_;
  std::vector<std::shared_ptr<SplitReport>> splits_;  // a parent's children, under splits_mu_
  std::shared_ptr<SplitReport> split_;                // a child's own line
  cudaEvent_t event_;
  std::unique_ptr<ControlChannel> channel_;
  OpRecord ops_[kOps];
  std::atomic<int> event_state_{kIdle};
  cudaEvent_t tail_event_;
  std::atomic<int> tail_state_{kIdle};  // kBusy while a thread records or queries it
  std::atomic<uint64_t> tail_seq_{0};   // the operation it was last recorded after
  uint64_t event_seq_ = 0;              // written by whoever moved the state to busy
  std::atomic<uint64_t> completed_{0};
  FlightRecorder* recorder_ = nullptr;
  // Watchdog thread only:
  uint64_t trace_requests_seen_ = 0;
  bool failure_written_ = false;
  std::chrono::steady_clock::time_point pending_since_{};
  uint64_t tail_watched_seq_ = 0;
  std::chrono::steady_clock::time_point tail_since_{};
};

}  // namespace cc::watch
