// A communicator's end: cc_comm_destroy finalizes NCCL within the deadline
// (aborting past it; a failed one is aborted at once), leaves the job cleanly
// and buries the handle; cc_comm_abort marks it aborted and tells the other
// ranks.
#include <algorithm>
#include <chrono>
#include <utility>

#include "common/log.hpp"
#include "lib/comm/comm.hpp"
#include "lib/comm/fast_setup.hpp"
#include "lib/comm/handle.hpp"
#include "lib/comm/parts.hpp"

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

}  // namespace

void destroy(std::unique_ptr<cc_comm> c) {
  const auto start = Clock::now();
  stop_watch(c.get());  // no tick runs on it from here on
  const bool healthy = core::usable(*c) && !c->abort_requested.load();
  if (healthy && (c->nccl != nullptr || c->nccl_ctl != nullptr)) {
    const auto deadline = Clock::now() + c->timeout;
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
