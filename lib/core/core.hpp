// One communicator's NCCL handles and health: who it is, its two NCCL
// communicators, whether it still works and why not. Every other room of
// libcc reads this state; only abort and the watchdog change it, through
// fail(). cc_comm (lib/comm/comm.hpp) is a Core with the rest of a
// communicator's life around it, so the watchdog and the fast paths hold a
// Core and never call back into the communicator's own code.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include <nccl.h>

#include "common/status.hpp"
#include "lib/core/graphs.hpp"
#include "lib/fast/channel.hpp"

namespace cc::core {

using Clock = std::chrono::steady_clock;

// Why a communicator stopped working; set once, by abort or the watchdog.
enum class State : int { ok = 0, aborted = 1, peer_failed = 2, timed_out = 3, mismatch = 4 };

struct Core {
  int rank = -1;
  int nranks = 0;
  int device = -1;
  std::string host;
  uint32_t pid = 0;
  // The rendezvous's number for this communicator: the n-th one this process
  // joined in the job (0 for a communicator made by split).
  uint32_t comm_number = 0;
  // Its generation, as cc_comm_generation tells it: 0 for one made by init,
  // one more for each cc_comm_shrink or cc_comm_regrow (a replacement joins
  // one above 0); a split child has its parent's. In every who().
  uint32_t generation = 0;
  // What proves this rank's seat to the rendezvous in a recovery
  // (rv::Joined::seat); a split child has none and recovers by its parent.
  std::vector<uint8_t> seat;
  std::chrono::milliseconds timeout{0};

  // Two NCCL communicators over the same ranks. `nccl` does the work and is
  // blocking: a non-blocking one launches every collective from a helper
  // thread, about 100 us a call. `nccl_ctl` is its non-blocking twin, made
  // first so init has a deadline, and kept so cc_comm_split has one too.
  ncclComm_t nccl = nullptr;
  ncclComm_t nccl_ctl = nullptr;
  // Set where cc_comm_shrink could use ncclCommShrink on nccl_ctl: a failure
  // then aborts `nccl` only (the kernels stop) and keeps nccl_ctl, which runs
  // no kernels, for the shrink; abort_kept_ctl frees it (destroy).
  bool keep_ctl = false;
  std::atomic<bool> ctl_kept{false};
  // cc's own all-reduce kernels, when every rank could set them up; null
  // means ncclAllReduce for every size.
  fast::Channel* fast = nullptr;

  std::atomic<int> state{static_cast<int>(State::ok)};
  // A mismatch's error was returned to the caller (state_status): until
  // then cc_comm_destroy returns it, so that no desync ends in silence.
  mutable std::atomic<bool> mismatch_returned{false};
  // Set before ncclCommAbort; calls in flight (counted by CallGuard) see it
  // and stop touching `nccl`, and abort waits (bounded) for them to leave.
  std::atomic<bool> abort_requested{false};
  std::atomic<bool> abort_done{false};  // abort_nccl has returned from NCCL
  std::atomic<int> calls_in_flight{0};
  // Operations enqueued so far; the watchdog compares it with completions.
  std::atomic<uint64_t> ops_enqueued{0};
  // For a split child, its parent, whose failure it inherits (handles are
  // never freed, so the pointer stays readable).
  const Core* parent = nullptr;
  // The CUDA graphs that captured calls on `nccl` and still live: NCCL's
  // destroy and abort of it wait for them without end.
  CapturedGraphs graphs;

  mutable std::mutex failure_mu;
  std::string failure;  // the story behind a state other than ok

  // "rank 1 (host gpu-a, pid 4242)": who this communicator's messages are about.
  std::string who() const;

  Core() = default;
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;
};

// Cheap when ok (one atomic load).
inline bool usable(const Core& c) {
  return c.state.load(std::memory_order_acquire) == static_cast<int>(State::ok);
}

// A communicator that stopped working: CC_ERR_ABORTED / _PEER_FAILED /
// _TIMEOUT / _MISMATCH, "<call> on <who>: <story>", for the caller of `call`
// (a mismatch counts as returned); `for_caller` false for a log line.
Status state_status(const char* call, const Core& c, bool for_caller = true);

// Marks the communicator failed (the first caller wins), records the story
// and aborts its NCCL communicators. Returns true when this call set the state.
bool fail(Core& c, State state, const std::string& story, int calls_held = 0);

// cc_comm_abort's mark: later calls report the caller's own abort, even when
// a failure was declared first (the peers' aborts can reach this rank's
// watchdog as NCCL's remote error just before its own cc_comm_abort). True
// when nothing had failed before, as fail().
bool fail_by_abort(Core& c, const std::string& story);

// Aborts the NCCL communicators once, whatever thread calls (nccl_ctl is
// kept instead when keep_ctl is set). Waits up to half a second for calls in
// flight (beyond the caller's own `calls_held`) to notice and leave NCCL
// alone. While graphs that captured calls on `nccl` live, its abort runs on
// a thread of its own (late_abort.hpp): NCCL stops the kernels at once, then
// waits for those graphs without end.
void abort_nccl(Core& c, int calls_held = 0);
// Aborts nccl_ctl when abort_nccl kept it; a no-op otherwise. In the
// background (late_abort.hpp) when asked: a dead peer makes it slow.
void abort_kept_ctl(Core& c, bool in_background = false);
// Waits until abort_nccl, begun on another thread, has finished (true), or
// the deadline passed (false); true at once when it finished earlier or
// none was begun.
bool wait_abort_done(const Core& c, Clock::time_point deadline);
// True while nccl_ctl is alive after a failure (kept for a shrink), or the
// communicator works.
bool ctl_usable(const Core& c);

// Counts a call that touches c.nccl; while one is counted, abort waits.
class CallGuard {
 public:
  explicit CallGuard(Core& c) : c_(c) {
    c_.calls_in_flight.fetch_add(1, std::memory_order_seq_cst);
  }
  ~CallGuard() { c_.calls_in_flight.fetch_sub(1, std::memory_order_seq_cst); }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  Core& c_;
};

// Asked about every kInterruptEvery while wait_ready waits; true ends the
// wait (its caller knows why: news from the rendezvous during init).
using Interrupt = std::function<bool()>;
inline constexpr std::chrono::milliseconds kInterruptEvery{5};

// Waits while NCCL reports ncclInProgress for `nccl`, until `deadline`, an
// abort request or `interrupted`. Returns the final state: ncclInProgress
// when the deadline passed, the communicator is being aborted or the wait
// was interrupted.
ncclResult_t wait_ready(const Core& c, ncclComm_t nccl, Clock::time_point deadline,
                        const Interrupt& interrupted = {});

// "<nccl_call> failed on <who>: <error string>: <NCCL's last error>. Run with
// NCCL_DEBUG=WARN ..."
Status nccl_failure(const char* nccl_call, const Core& c, ncclResult_t result);

// Makes `device` current for a scope and restores the caller's device after.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace cc::core
