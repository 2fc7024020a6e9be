// A communicator's end: cc_comm_destroy compares the ranks' calls up to
// their last, a split child's through its parent's client (a difference
// fails it: CC_ERR_MISMATCH, the flight recorder written), finalizes NCCL
// within the deadline (aborting past it; a failed one is aborted at once),
// leaves the job cleanly and buries the handle; cc_comm_abort marks it
// aborted and tells the other ranks.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "common/log.hpp"
#include "lib/comm/comm.hpp"
#include "lib/comm/fast_setup.hpp"
#include "lib/comm/handle.hpp"
#include "lib/comm/parts.hpp"
#include "lib/core/call_log.hpp"
#include "lib/watch/comm_watch.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::comm {
namespace {

using std::chrono::milliseconds;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Finalizes both NCCL communicators, then destroys them, within the
// deadline; false when that did not work (the caller aborts instead, which
// NCCL allows after a finalize). NCCL's destroy of a communicator joins a
// service thread of its own that reads its stop flag only between polls of
// 500 ms, and ncclCommFinalize sets that flag. Finalizing both before
// destroying either lets the two threads wind down together: the destroy
// waits for one such period at most, as with a single communicator, not one
// per communicator. nccl_ctl is non-blocking, so its finalize runs on NCCL's
// thread while the blocking one runs here.
bool finalize_nccl(cc_comm* c, Clock::time_point deadline) {
  ncclResult_t ctl = ncclSuccess;
  ncclResult_t work = ncclSuccess;
  if (c->nccl_ctl != nullptr) ctl = ncclCommFinalize(c->nccl_ctl);
  if (c->nccl != nullptr) {
    work = ncclCommFinalize(c->nccl);
    if (work == ncclInProgress) work = core::wait_ready(*c, c->nccl, deadline);
  }
  if (c->nccl_ctl != nullptr && (ctl == ncclSuccess || ctl == ncclInProgress))
    ctl = core::wait_ready(*c, c->nccl_ctl, deadline);
  for (const auto& [which, r] : {std::pair{"", work}, std::pair{" (control)", ctl}}) {
    if (r == ncclSuccess) continue;
    log().warn("{}: ncclCommFinalize{} {} ({}); aborting the NCCL communicators instead", c->who(),
               which, r == ncclInProgress ? "did not finish in time" : "failed",
               ncclGetErrorString(r));
    return false;
  }
  if (c->nccl != nullptr) ncclCommDestroy(c->nccl);
  c->nccl = nullptr;
  if (c->nccl_ctl != nullptr) ncclCommDestroy(c->nccl_ctl);
  c->nccl_ctl = nullptr;
  return true;
}

// The ranks' calls compared up to their last, before NCCL lets go: the
// rendezvous answers once every live rank has sent its own (`end`, sent on
// `client`). A difference fails the communicator (its NCCL is aborted, not
// finalized, as a call may wait for a partner that never comes). Ranks that
// do not all come before the deadline leave it unchecked, with a warning.
Status end_calls(cc_comm* c, rv::Client& client, rv::CallsEnd end, Clock::time_point deadline) {
  core::CallLog& calls = c->recorder->calls();
  end.last = calls.collectives();
  end.last_replay = calls.replays();
  end.calls = calls.take_report();
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  end.timeout_ms = static_cast<uint32_t>(std::max<long long>(1, left));
  const Status st = client.end_calls(end, [&calls](uint64_t after, uint64_t through) {
    return calls.points_in(after, through, rv::kMaxHeartbeatCalls);
  });
  if (st.ok()) return st;
  if (st.code != CC_ERR_MISMATCH) {
    log().warn("{}: the ranks' last calls were not compared: {}", c->who(), st.message);
    return Status::success();
  }
  if (core::fail(*c, core::State::mismatch, st.message)) {
    log().error("{}: {}", c->who(), st.message);
    std::string path;
    const uint64_t completed = c->watch ? c->watch->completed() : 0;
    if (!c->recorder->dir().empty()) {
      if (Status w = c->recorder->write(c->recorder->dir(), "mismatch", completed, &path); !w.ok())
        log().warn("{}: {}", c->who(), w.message);
      else
        log().warn("{}: flight recorder written to {} (mismatch)", c->who(), path);
    }
  }
  return core::state_status("cc_comm_destroy", *c);
}

// Whom a rank's end speaks for: the communicator whose client sends it
// and, for a split child, the child's line (split, color, its rank and size
// in the child).
rv::CallsEnd calls_end(const cc_comm& c) {
  const cc_comm& sender = c.split_parent != nullptr ? *c.split_parent : c;
  rv::CallsEnd end;
  end.comm_number = sender.comm_number;
  end.generation = sender.generation;
  if (c.split_parent == nullptr) return end;
  end.split = c.split_number;
  end.split_color = c.split_color;
  end.split_rank = c.rank;
  end.split_ranks = c.nranks;
  return end;
}

// A split child has no client: its calls go on its parent's, as its line
// (split, color, its rank in the child), while the parent lives and works.
// A child of a split child is not compared.
Status end_split_calls(cc_comm* c, Clock::time_point deadline) {
  cc_comm* parent = c->split_parent;
  std::lock_guard<std::mutex> lock(parent->client_mu);
  if (parent->split_parent != nullptr && !parent->client) return Status::success();
  std::string why;
  if (parent->client_closing || !parent->client)
    why = "its parent communicator was destroyed first; destroy a communicator made by "
          "cc_comm_split before its parent, in the same order on every rank";
  else if (!core::usable(*parent))
    why = "its parent communicator failed (" +
          core::state_status("cc_comm_destroy", *parent, /*for_caller=*/false).message +
          ")";
  if (!why.empty()) {
    log().warn("{}: the ranks' last calls on this communicator (made by cc_comm_split) were not "
               "compared: {}",
               c->who(), why);
    return Status::success();
  }
  return end_calls(c, *parent->client, calls_end(*c), deadline);
}

Status compare_last_calls(cc_comm* c, Clock::time_point deadline) {
  if (!c->config.check_calls || !c->recorder) return Status::success();
  if (c->split_parent != nullptr) return end_split_calls(c, deadline);
  if (!c->client) return Status::success();
  return end_calls(c, *c->client, calls_end(*c), deadline);
}

}  // namespace

Status graphs_released(const cc_comm* c) {
  // A destroyed graph's release reaches cc from CUDA's own thread, soon after.
  const auto until = Clock::now() + std::chrono::seconds(1);
  int live = c->graphs.live();
  while (live > 0 && Clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(1));
    live = c->graphs.live();
  }
  if (live == 0) return Status::success();
  return make_status(
      CC_ERR_INVALID_USAGE,
      "cc_comm_destroy on " + c->who() + ": " + std::to_string(live) +
          " CUDA graph(s) that captured this communicator's calls are still alive, and NCCL "
          "waits without end for every one of them before it lets go of a communicator. "
          "Destroy them first (cudaGraphExecDestroy and cudaGraphDestroy of each graph and "
          "instance; torch.cuda.CUDAGraph.reset()), then call cc_comm_destroy again: the "
          "communicator is untouched");
}

Status destroy(std::unique_ptr<cc_comm> c) {
  const auto start = Clock::now();
  const auto deadline = start + c->timeout;
  {
    // No split child uses its client from here on (end_split_calls); one
    // that does now is waited for, while the watchdog still heartbeats.
    std::lock_guard<std::mutex> lock(c->client_mu);
    c->client_closing = true;
  }
  stop_watch(c.get());  // no tick runs on it from here on
  Status verdict;
  if (core::usable(*c) && !c->abort_requested.load()) verdict = compare_last_calls(c.get(), deadline);
  // A mismatch found while the ranks ran (the watchdog's) that no call has
  // returned yet, such as one in graph replays after the last call.
  if (verdict.ok() && c->state.load() == static_cast<int>(core::State::mismatch) &&
      !c->mismatch_returned.load(std::memory_order_acquire))
    verdict = core::state_status("cc_comm_destroy", *c);
  if (c->graph_replays) c->graph_replays->end();  // its graphs may outlive it
  const bool healthy = core::usable(*c) && !c->abort_requested.load();
  if (healthy && (c->nccl != nullptr || c->nccl_ctl != nullptr)) {
    core::DeviceScope scope(c->device);
    bool ok = drain_fast_allreduce(c.get(), deadline);  // no kernel of cc's runs past here
    ok = ok && unmap_fast_allreduce_peers(c.get(), deadline);
    const auto nccl_start = Clock::now();
    ok = ok && finalize_nccl(c.get(), deadline);
    if (!ok) core::abort_nccl(*c);
    log().debug("{}: NCCL communicators {} in {:.1f} ms", c->who(),
                ok ? "finalized and destroyed" : "aborted", ms_since(nccl_start));
  } else {
    core::abort_nccl(*c);  // no-op when already aborted or nothing to abort
  }
  // The control communicator a failure kept for a shrink: aborted in the
  // background, as it may take a second with a dead peer. An abort still
  // running on another thread (stop_watch above waited for the watchdog's)
  // decides first whether it is kept.
  core::wait_abort_done(*c, Clock::now() + c->timeout);
  core::abort_kept_ctl(*c, /*in_background=*/true);
  c->nccl = nullptr;
  c->nccl_ctl = nullptr;
  {
    core::DeviceScope scope(c->device);
    teardown_fast_allreduce(c.get());
  }
  free_scratch(c.get());
  c->watch.reset();  // its CUDA event, once NCCL is done with the streams
  const auto leave_start = Clock::now();
  if (c->client) {
    // A clean leave, also for a failed communicator (without waiting for the
    // answer): the rendezvous must not count a survivor that lets go of its
    // failed communicator as dead.
    if (Status st = healthy ? c->client->leave() : c->client->leave_nowait(); !st.ok())
      log().debug("{}: leaving the rendezvous: {}", c->who(), st.message);
    c->client.reset();
  }
  if (c->server) {
    c->server->release(c->job_id, std::min(c->timeout, milliseconds(10000)));
    c->server.reset();
  }
  log().debug("{}: communicator destroyed in {:.1f} ms (leaving the rendezvous {:.1f} ms)",
              c->who(), ms_since(start), ms_since(leave_start));
  bury(std::move(c));
  return verdict;
}

void abort(cc_comm* c) {
  const std::string story = "the communicator was aborted by cc_comm_abort on " + c->who() +
                            "; destroy it with cc_comm_destroy and create a new one";
  if (core::fail_by_abort(*c, story) && c->client) {
    if (Status st = c->client->abort_nowait(story); !st.ok())
      log().debug("{}: telling the rendezvous about the abort: {}", c->who(), st.message);
  }
}

}  // namespace cc::comm
