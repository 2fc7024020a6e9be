// A communicator's end: cc_comm_destroy finalizes NCCL within the deadline
// (aborting past it; a failed one is aborted at once), leaves the job cleanly
// and buries the handle; cc_comm_abort marks it aborted and tells the other
// ranks.
#include <algorithm>

#include "common/log.hpp"
#include "lib/comm/comm.hpp"
#include "lib/comm/fast_setup.hpp"
#include "lib/comm/handle.hpp"
#include "lib/comm/parts.hpp"

namespace cc::comm {
namespace {

using std::chrono::milliseconds;

// Finalizes and destroys one NCCL communicator within the deadline; false
// when that did not work (the caller aborts instead).
bool finalize_nccl(cc_comm* c, ncclComm_t nccl, Clock::time_point deadline) {
  ncclResult_t r = ncclCommFinalize(nccl);
  if (r == ncclSuccess || r == ncclInProgress) r = core::wait_ready(*c, nccl, deadline);
  if (r != ncclSuccess) {
    log().warn("{}: ncclCommFinalize {} ({}); aborting the NCCL communicator instead", c->who(),
               r == ncclInProgress ? "did not finish in time" : "failed", ncclGetErrorString(r));
    return false;
  }
  ncclCommDestroy(nccl);
  return true;
}

}  // namespace

void destroy(std::unique_ptr<cc_comm> c) {
  stop_watch(c.get());  // no tick runs on it from here on
  const bool healthy = core::usable(*c) && !c->abort_requested.load();
  if (healthy && (c->nccl != nullptr || c->nccl_ctl != nullptr)) {
    const auto deadline = Clock::now() + c->timeout;
    core::DeviceScope scope(c->device);
    bool ok = drain_fast_allreduce(c.get(), deadline);  // no kernel of cc's runs past here
    ok = ok && unmap_fast_allreduce_peers(c.get(), deadline);
    ok = ok && (c->nccl == nullptr || finalize_nccl(c.get(), c->nccl, deadline));
    if (ok) c->nccl = nullptr;
    ok = ok && (c->nccl_ctl == nullptr || finalize_nccl(c.get(), c->nccl_ctl, deadline));
    if (ok) c->nccl_ctl = nullptr;
    if (!ok) core::abort_nccl(*c);
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
  log().debug("{}: communicator destroyed", c->who());
  bury(std::move(c));
}

void abort(cc_comm* c) {
  const std::string story = "the communicator was aborted by cc_comm_abort on " + c->who() +
                            "; destroy it with cc_comm_destroy and create a new one";
  if (core::fail(*c, core::State::aborted, story) && c->client) {
    if (Status st = c->client->abort_nowait(story); !st.ok())
      log().debug("{}: telling the rendezvous about the abort: {}", c->who(), st.message);
  }
}

}  // namespace cc::comm
