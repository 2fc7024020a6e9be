// cc_comm_split: a child communicator made by ncclCommSplit of the parent's
// non-blocking communicator, within the deadline. A child has no rendezvous
// connection of its own; it inherits its parent's failures, and its calls
// are compared among its members through its parent's control channel.
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/log.hpp"
#include "common/settings.hpp"
#include "lib/comm/comm.hpp"
#include "lib/comm/fast_setup.hpp"
#include "lib/comm/parts.hpp"

namespace cc::comm {

using std::chrono::milliseconds;

namespace {

// The n-th cc_comm_split of `parent` (1, 2, ...): every rank of the parent
// calls it in the same order (NCCL's rule), so the number names the same
// split on every rank. Handles are never freed, so a pointer stays unique.
uint32_t next_split_number(const cc_comm* parent) {
  static std::mutex mu;
  static std::unordered_map<const cc_comm*, uint32_t> made;
  std::lock_guard<std::mutex> lock(mu);
  return ++made[parent];
}

}  // namespace

Status split(cc_comm* parent, int color, int key, cc_comm_t* newcomm, const cc_config_t* config) {
  auto c = std::make_unique<cc_comm>();
  if (Status st = launch::resolve_config(config, settings::process_env(), &c->config); !st.ok())
    return make_status(st.code, "cc_comm_split on " + parent->who() + ": " + st.message);
  c->timeout = milliseconds(c->config.timeout_ms);
  c->host = parent->host;
  c->pid = parent->pid;
  c->job_id = parent->job_id;
  c->device = parent->device;
  c->generation = parent->generation;
  const auto deadline = Clock::now() + c->timeout;
  const uint32_t split_number = next_split_number(parent);

  ncclConfig_t nconfig = NCCL_CONFIG_INITIALIZER;
  nconfig.blocking = 0;
  ncclComm_t child = nullptr;
  ncclResult_t r;
  {
    core::CallGuard guard(*parent);
    if (!core::usable(*parent)) return core::state_status("cc_comm_split", *parent);
    core::DeviceScope scope(parent->device);
    r = ncclCommSplit(parent->nccl_ctl, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child,
                      &nconfig);
    if (r == ncclInProgress || r == ncclSuccess)
      r = core::wait_ready(*parent, parent->nccl_ctl, deadline);
  }
  c->nccl_ctl = child;
  if (r == ncclSuccess && child != nullptr) r = core::wait_ready(*c, child, deadline);
  if (r != ncclSuccess) {
    Status st = r == ncclInProgress
                    ? make_status(CC_ERR_TIMEOUT,
                                  parent->who() + ": ncclCommSplit did not finish within " +
                                      std::to_string(c->timeout.count()) +
                                      " ms; every rank of the parent must call cc_comm_split")
                    : core::nccl_failure("ncclCommSplit", *parent, r);
    if (child != nullptr) core::abort_nccl(*c);
    return st;
  }
  if (child == nullptr) return Status::success();  // negative color: no new communicator
  if (ncclCommUserRank(child, &c->rank) != ncclSuccess ||
      ncclCommCount(child, &c->nranks) != ncclSuccess) {
    core::abort_nccl(*c);
    return make_status(CC_ERR_NCCL,
                       parent->who() + ": could not read the rank of the new communicator");
  }
  {
    core::DeviceScope scope(c->device);
    if (Status st = make_work_comm(c.get(), deadline); !st.ok()) {
      core::abort_nccl(*c);
      return st;
    }
  }
  if (Status st = alloc_scratch(c.get()); !st.ok()) {
    core::abort_nccl(*c);
    return st;
  }
  c->parent = parent;  // before the kernels' set-up, which may take the parent's plan
  c->split_parent = parent;
  c->split_number = split_number;
  c->split_color = color;
  Status fast_st;
  {
    core::DeviceScope scope(c->device);
    fast_st = setup_fast_allreduce(c.get(), deadline);
  }
  if (!fast_st.ok()) {
    core::abort_nccl(*c);
    teardown_fast_allreduce(c.get());
    free_scratch(c.get());
    return fast_st;
  }
  if (Status st = start_watch(c.get(), false, SplitOf{parent, split_number, color}); !st.ok()) {
    core::abort_nccl(*c);
    teardown_fast_allreduce(c.get());
    free_scratch(c.get());
    return st;
  }
  log().debug("split: parent rank {} -> color {} rank {} of {}", parent->rank, color, c->rank,
              c->nranks);
  *newcomm = c.release();
  return Status::success();
}

}  // namespace cc::comm
