// A communicator's record of its calls: the running fingerprint of its
// collectives, of its sends and recvs per peer and of the replays of CUDA
// graphs that captured its calls, the points a heartbeat
// carries to the rendezvous for comparison across ranks, and the flight
// recorder's ring of the last calls with their stream and times. No CUDA:
// unit-tested alone. The calling thread records (one hash step and a ring
// slot under an uncontended lock); the watchdog thread reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/call_desc.hpp"

namespace cc::core {

struct TraceEntry {
  CallPoint point;
  uint64_t op = 0;           // the communicator's operation number (the watchdog's "op #N")
  uint64_t stream = 0;       // the CUDA stream, as a number (0: the default stream)
  int64_t enqueued_us = 0;   // wall-clock microseconds since the epoch
  int64_t completed_us = 0;  // when the watchdog saw it complete; 0 while not seen
};

class CallLog {
 public:
  // Points of each kind a heartbeat carries at most.
  static constexpr size_t kRecent = 16;       // the last collectives, and the last sends and recvs
  static constexpr size_t kCheckpoints = 32;  // collectives numbered a multiple of kCheckpointEvery
  static constexpr uint64_t kCheckpointEvery = 64;
  // Collectives since the last report past which the next report is due at
  // once, not at the next heartbeat.
  static constexpr uint64_t kReportEvery = 64;

  // `capacity`: entries the ring keeps (CC_TRACE_BUFFER; 0 keeps none, the
  // fingerprints still run).
  CallLog(int nranks, size_t capacity);

  // Hot path. `op` is the communicator's operation number of this call.
  void record(const CallDesc& call, uint64_t op, uint64_t stream, int64_t now_us);
  // The watchdog saw every operation up to `op` complete.
  void completed_through(uint64_t op, int64_t now_us);
  // A replay of a CUDA graph that captured `calls` calls of this
  // communicator, `graph` their fingerprint and `first` the first of them:
  // the replay line's next point. Called from the thread CUDA runs the
  // graph's host node on, as the GPU reaches it.
  void record_replay(uint64_t graph, const CallDesc& first, int32_t calls);

  // The points recorded since the last call of it (each is sent once), in
  // the order they were recorded.
  std::vector<CallPoint> take_report();
  // Whether kReportEvery collectives or more were recorded since the last report.
  bool report_due() const;
  // The ring's collectives numbered after `after` up to `through`, lowest
  // first, at most `max` of them: what the rendezvous asks for where
  // reports left a gap before a difference (rv::CallsWanted).
  std::vector<CallPoint> points_in(uint64_t after, uint64_t through, size_t max) const;
  // The ring, oldest first.
  std::vector<TraceEntry> entries() const;
  uint64_t collectives() const;  // the number of the last collective (0: none yet)
  uint64_t replays() const;      // the number of the last graph replay (0: none yet)
  uint64_t fingerprint() const;  // the collectives' running fingerprint
  size_t capacity() const { return capacity_; }

 private:
  struct Line {
    uint64_t seq = 0;
    uint64_t fingerprint = 0;
    // Counts a call that makes the line's fingerprint `next`; `p` gets the
    // call's number on the line and that fingerprint.
    void count(uint64_t next, CallPoint* p) {
      seq += 1;
      fingerprint = next;
      p->seq = seq;
      p->fingerprint = fingerprint;
    }
  };
  // The last points of one kind, oldest first: a ring, so that keeping one
  // more on the hot path moves none of the others.
  class LastPoints {
   public:
    explicit LastPoints(size_t max) : slots_(max) {}
    void push(const CallPoint& p);
    size_t size() const { return size_; }
    const CallPoint& operator[](size_t i) const { return slots_[(first_ + i) % slots_.size()]; }
    void clear() { first_ = size_ = 0; }

   private:
    std::vector<CallPoint> slots_;
    size_t first_ = 0;
    size_t size_ = 0;
  };

  const size_t capacity_;
  mutable std::mutex mu_;
  Line collectives_;
  std::vector<Line> sends_, recvs_;  // by peer
  std::vector<TraceEntry> ring_;
  size_t next_ = 0;  // the ring's next slot
  size_t filled_ = 0;
  uint64_t completed_op_ = 0;
  uint64_t reported_seq_ = 0;  // the last collective when the last report was taken
  Line replays_;
  // Not yet reported:
  LastPoints recent_{kRecent}, checkpoints_{kCheckpoints}, recent_p2p_{kRecent};
  LastPoints recent_replays_{kRecent}, replay_checkpoints_{kCheckpoints};
};

}  // namespace cc::core
