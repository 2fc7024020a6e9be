// The communicator behind cc_comm_t, shared by comm.cpp, collectives.cpp and
// (next) the watchdog. A destroyed handle is never freed: it stays in a
// process-wide graveyard marked dead, so using it again is a clear error,
// not a use-after-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <nccl.h>

#include "cc/cc.h"
#include "common/status.hpp"
#include "lib/comm/embedded_server.hpp"
#include "lib/fast/fast_allreduce.hpp"
#include "lib/launch/config.hpp"
#include "lib/watch/comm_watch.hpp"
#include "rendezvous/client.hpp"

namespace cc {

inline constexpr uint32_t kCommLive = 0xcc0c0a11u;
inline constexpr uint32_t kCommDead = 0xdeadcc0cu;

// Why a communicator stopped working; set once, by abort or the watchdog.
enum class CommState : int { ok = 0, aborted = 1, peer_failed = 2, timed_out = 3 };

}  // namespace cc

struct cc_comm {
  std::atomic<uint32_t> magic{cc::kCommLive};
  std::atomic<int> state{static_cast<int>(cc::CommState::ok)};

  int rank = -1;
  int nranks = 0;
  int device = -1;
  std::string host;
  std::string job_id;
  uint32_t generation = 0;  // 0 for a communicator made by split
  cc::ResolvedConfig config;
  std::chrono::milliseconds timeout{300000};

  // Two NCCL communicators over the same ranks. `nccl` does the work and is
  // blocking: a non-blocking one launches every collective from a helper
  // thread, about 100 us a call. `nccl_ctl` is its non-blocking twin, made
  // first so init has a deadline, and kept so cc_comm_split has one too.
  ncclComm_t nccl = nullptr;
  ncclComm_t nccl_ctl = nullptr;
  // Set before ncclCommAbort; calls in flight (counted by CallGuard) see it
  // and stop touching `nccl`, and abort waits (bounded) for them to leave.
  std::atomic<bool> abort_requested{false};
  std::atomic<int> calls_in_flight{0};
  int* scratch = nullptr;  // one device int for cc_barrier
  // cc's own small-message all-reduce, when every rank could make it
  // (lib/fast_allreduce.hpp); null means ncclAllReduce for every size.
  cc::fast::Channel* fast = nullptr;

  // The control channel (issue 4's watchdog reads peer events from it) and,
  // on rank 0 in embedded mode, its share of the rendezvous server.
  std::unique_ptr<cc::rv::Client> client;
  std::unique_ptr<cc::EmbeddedServerRef> server;

  // Operations enqueued so far; the watchdog compares it with completions.
  std::atomic<uint64_t> ops_enqueued{0};
  // The watchdog's view of this communicator (null with CC_WATCHDOG=0), and
  // for a split child its parent, whose failure it inherits (handles are
  // never freed, so the pointer stays readable).
  std::unique_ptr<cc::CommWatch> watch;
  cc_comm* parent = nullptr;

  std::mutex failure_mu;
  std::string failure;  // the story behind a state other than ok

  cc_comm() = default;
  ~cc_comm() = default;
  cc_comm(const cc_comm&) = delete;
  cc_comm& operator=(const cc_comm&) = delete;
};

namespace cc {

// Checks a handle at a call's entry: NULL and destroyed handles are
// CC_ERR_INVALID_ARGUMENT naming `call`.
Status check_comm_handle(const char* call, const cc_comm* comm);
// A communicator that stopped working: CC_ERR_ABORTED / _PEER_FAILED /
// _TIMEOUT with the stored story. Cheap when ok (one atomic load).
inline bool comm_usable(const cc_comm* comm) {
  return comm->state.load(std::memory_order_acquire) == static_cast<int>(CommState::ok);
}
Status comm_state_status(const char* call, cc_comm* comm);

// Marks the communicator failed (first caller wins), records the story and
// aborts its NCCL communicator. For cc_comm_abort and the watchdog.

// Returns true when this call set the state (the first failure wins).
bool comm_fail(cc_comm* comm, CommState state, const std::string& story, int calls_held = 0);

// Aborts the NCCL communicator once, whatever thread calls. Waits up to half
// a second for calls in flight (beyond the caller's own `calls_held`) to
// notice and leave NCCL alone.
void comm_abort_nccl(cc_comm* comm, int calls_held = 0);

// Counts a call that touches comm->nccl; while one is counted, abort waits.
class CallGuard {
 public:
  explicit CallGuard(cc_comm* comm) : comm_(comm) {
    comm_->calls_in_flight.fetch_add(1, std::memory_order_seq_cst);
  }
  ~CallGuard() { comm_->calls_in_flight.fetch_sub(1, std::memory_order_seq_cst); }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  cc_comm* comm_;
};

// Waits while NCCL reports ncclInProgress for comm, until `deadline` or an
// abort request. Returns the final state: ncclInProgress when the deadline
// passed or the communicator is being aborted.
ncclResult_t nccl_wait_ready(cc_comm* comm, ncclComm_t nccl,
                             std::chrono::steady_clock::time_point deadline);

// "ncclAllReduce failed on rank R (host H): <error string>: <last error>".
Status nccl_failure(const char* nccl_call, const cc_comm* comm, ncclResult_t result);

}  // namespace cc
