#include "lib/core/core.hpp"

#include <thread>

#include <cuda_runtime_api.h>

#include "common/log.hpp"
#include "common/who.hpp"
#include "lib/core/late_abort.hpp"
#include "lib/core/nccl_symbol.hpp"

namespace cc::core {

// A recovered communicator's message names its generation; generation 0 (every
// communicator that never went through a recovery) is left unsaid.
std::string Core::who() const {
  return cc::who(Who{rank, host, pid, generation > 0 ? static_cast<int>(generation) : -1});
}

Status state_status(const char* call, const Core& c, bool for_caller) {
  State state = State::ok;
  std::string story;
  {
    std::lock_guard<std::mutex> lock(c.failure_mu);  // the state and its story as one
    state = static_cast<State>(c.state.load(std::memory_order_acquire));
    story = c.failure;
  }
  cc_result_t code = CC_ERR_ABORTED;
  if (state == State::peer_failed) code = CC_ERR_PEER_FAILED;
  if (state == State::timed_out) code = CC_ERR_TIMEOUT;
  if (state == State::mismatch) {
    code = CC_ERR_MISMATCH;
    if (for_caller) c.mismatch_returned.store(true, std::memory_order_release);
  }
  if (state == State::ok) story = "the communicator is being aborted";  // a request in flight
  return make_status(code, std::string(call) + " on " + c.who() + ": " + story);
}

bool fail(Core& c, State state, const std::string& story, int calls_held) {
  int expected = static_cast<int>(State::ok);
  {
    std::lock_guard<std::mutex> lock(c.failure_mu);
    if (!c.state.compare_exchange_strong(expected, static_cast<int>(state),
                                         std::memory_order_seq_cst))
      return false;
    c.failure = story;
  }
  abort_nccl(c, calls_held);
  return true;
}

bool fail_by_abort(Core& c, const std::string& story) {
  if (fail(c, State::aborted, story)) return true;
  std::lock_guard<std::mutex> lock(c.failure_mu);
  c.state.store(static_cast<int>(State::aborted), std::memory_order_seq_cst);
  c.failure = story;
  return false;
}

namespace {

int calls_inside(const Core& c) { return c.calls_in_flight.load(std::memory_order_seq_cst); }

// A call still inside NCCL after abort_nccl's wait is blocked there (for
// room in NCCL's work queue that a hung kernel never frees, or for a peer's
// connection): NCCL's abort would free what that call reads.
// ncclCommRevoke (NCCL 2.28 and later) stops the communicator's work
// without freeing it, so the call can return first; the wait for it is
// short, as the watchdog's thread may be the one waiting.
void revoke_under_calls(Core& c, int calls_held) {
  using RevokeFn = ncclResult_t (*)(ncclComm_t, int);
  static const auto revoke = reinterpret_cast<RevokeFn>(nccl_symbol("ncclCommRevoke"));
  if (revoke == nullptr) {
    log().warn("{}: a call is still inside NCCL while its communicator is aborted, and this "
               "NCCL has no ncclCommRevoke (2.28 and later) to stop it first",
               c.who());
    return;
  }
  const ncclResult_t r = revoke(c.nccl, 0);  // NCCL_REVOKE_DEFAULT
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (calls_inside(c) > calls_held && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  log().info("{}: ncclCommRevoke {}; {} call(s) still inside NCCL", c.who(),
             ncclGetErrorString(r), calls_inside(c) - calls_held);
}

}  // namespace

void abort_nccl(Core& c, int calls_held) {
  if (c.abort_requested.exchange(true, std::memory_order_seq_cst)) return;
  fast::request_abort(c.fast);  // its kernels poll for this; NCCL's abort won't reach them
  if (c.nccl == nullptr && c.nccl_ctl == nullptr) {
    c.abort_done.store(true, std::memory_order_release);
    return;
  }
  const auto until = Clock::now() + std::chrono::milliseconds(500);
  while (calls_inside(c) > calls_held && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  if (c.nccl != nullptr && calls_inside(c) > calls_held) revoke_under_calls(c, calls_held);
  const auto start = Clock::now();
  if (const int graphs = c.graphs.live(); c.nccl != nullptr && graphs > 0) {
    abort_after_graphs(c.nccl, c.device, c.graphs.count());
    log().warn("{}: {} CUDA graph(s) that captured this communicator's calls are still alive: "
               "NCCL's abort stops its work now but lets go of it only once they are destroyed "
               "(cudaGraphExecDestroy and cudaGraphDestroy of each graph and instance; "
               "torch.cuda.CUDAGraph.reset()). cc_comm_destroy refuses until then",
               c.who(), graphs);
  } else if (c.nccl != nullptr) {
    ncclCommAbort(c.nccl);
  }
  if (c.nccl_ctl != nullptr && c.keep_ctl)
    c.ctl_kept.store(true, std::memory_order_release);
  else if (c.nccl_ctl != nullptr)
    ncclCommAbort(c.nccl_ctl);
  c.abort_done.store(true, std::memory_order_release);
  log().debug("{}: NCCL communicator aborted in {} ms{}", c.who(),
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(),
              c.ctl_kept.load() ? " (its control communicator kept for a shrink)" : "");
}

void abort_kept_ctl(Core& c, bool in_background) {
  if (!c.ctl_kept.exchange(false, std::memory_order_acq_rel) || c.nccl_ctl == nullptr) return;
  if (in_background)
    abort_later(c.nccl_ctl, c.device);
  else
    ncclCommAbort(c.nccl_ctl);
}

bool wait_abort_done(const Core& c, Clock::time_point deadline) {
  if (!c.abort_requested.load(std::memory_order_acquire)) return true;  // none begun
  while (!c.abort_done.load(std::memory_order_acquire)) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

bool ctl_usable(const Core& c) {
  if (c.nccl_ctl == nullptr) return false;
  if (c.ctl_kept.load(std::memory_order_acquire)) return true;
  return usable(c) && !c.abort_requested.load(std::memory_order_acquire);
}

ncclResult_t wait_ready(const Core& c, ncclComm_t nccl, Clock::time_point deadline,
                        const Interrupt& interrupted) {
  ncclResult_t state = ncclInProgress;
  auto next_ask = Clock::now() + kInterruptEvery;
  for (unsigned spin = 0;; ++spin) {
    if (ncclResult_t r = ncclCommGetAsyncError(nccl, &state); r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (c.abort_requested.load(std::memory_order_relaxed)) return ncclInProgress;
    if (spin < 64) {
      std::this_thread::yield();
      continue;
    }
    const auto now = Clock::now();
    if (now >= deadline) return ncclInProgress;
    if (interrupted && now >= next_ask) {
      if (interrupted()) return ncclInProgress;
      next_ask = Clock::now() + kInterruptEvery;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(spin < 1000 ? 20 : 500));
  }
}

Status nccl_failure(const char* nccl_call, const Core& c, ncclResult_t result) {
  const char* last = ncclGetLastError(c.abort_requested.load() ? nullptr : c.nccl);
  std::string text =
      std::string(nccl_call) + " failed on " + c.who() + ": " + ncclGetErrorString(result);
  if (last != nullptr && *last != '\0') text += std::string(": ") + last;
  text += ". Run with NCCL_DEBUG=WARN (or INFO) for NCCL's own account";
  return make_status(result == ncclUnhandledCudaError ? CC_ERR_CUDA : CC_ERR_NCCL, std::move(text));
}

DeviceScope::DeviceScope(int device) {
  if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
  if (device >= 0 && device != saved_) cudaSetDevice(device);
}

DeviceScope::~DeviceScope() {
  if (saved_ >= 0) cudaSetDevice(saved_);
}

}  // namespace cc::core
