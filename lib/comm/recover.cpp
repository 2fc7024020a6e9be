// Recovery: cc_comm_shrink and cc_comm_regrow make the next generation of a
// communicator after a failure. The rendezvous decides who is in it
// (rendezvous_recover.cpp, rendezvous/server_core/recovery.cpp); this rank
// then builds its NCCL communicator, by ncclCommShrink of the parent's
// control communicator where every survivor can (NCCL 2.27+, looked up when
// called), else by ncclCommInitRank with the new id the rendezvous handed
// out. While NCCL works, the new generation's connection is watched: a member
// that dies meanwhile fails the call at once with a message, and the survivors
// call again. Every step keeps the call's deadline.
#include <chrono>
#include <cstring>
#include <vector>

#include "common/log.hpp"
#include "common/return_if_error.hpp"
#include "common/who.hpp"
#include "lib/comm/comm.hpp"
#include "lib/comm/fast_setup.hpp"
#include "lib/comm/nccl_ids.hpp"
#include "lib/core/nccl_symbol.hpp"
#include "lib/comm/parts.hpp"
#include "lib/comm/rendezvous_recover.hpp"
#include "lib/launch/device.hpp"

namespace cc::comm {
namespace {

using std::chrono::milliseconds;
using ShrinkFn = ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);

ShrinkFn nccl_comm_shrink() {
  static const auto fn = reinterpret_cast<ShrinkFn>(core::nccl_symbol("ncclCommShrink"));
  return fn;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

// The NCCL work of the new generation: what it waits on, and what stops it.
struct Build {
  cc_comm* parent;
  cc_comm* c;
  rv::RecoverKind kind;
  std::chrono::steady_clock::time_point deadline;
  Status heard;  // what the new generation's connection reported, if anything
  std::string made_by = "ncclCommShrink";  // for the log: how the communicator was made
  std::function<bool()> interrupted() {
    return [this] {
      if (!heard.ok()) return true;
      heard = new_generation_events(*c->client, kind, c->generation);
      return !heard.ok();
    };
  }
};

Status late(const Build& b, const char* what) {
  return make_status(CC_ERR_TIMEOUT, std::string("NCCL did not finish ") + what +
                                         " for generation " + std::to_string(b.c->generation) +
                                         " before the deadline; a rank may have "
                                         "stopped: look at the others' output, and call " +
                                         recover_call(b.kind) + " again");
}

// ncclCommShrink of the parent's control communicator, excluding `failed`.
Status shrink_nccl(Build& b, const std::vector<int32_t>& failed) {
  cc_comm* parent = b.parent;
  cc_comm* c = b.c;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  std::vector<int> exclude(failed.begin(), failed.end());
  ncclComm_t child = nullptr;
  ncclResult_t r;
  {
    core::CallGuard guard(*parent);
    const bool failed_parent = !core::usable(*parent) || parent->abort_requested.load();
    r = nccl_comm_shrink()(parent->nccl_ctl, exclude.data(), static_cast<int>(exclude.size()),
                           &child, &config, failed_parent ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
    // c's state, not the parent's: a failed parent is marked aborted.
    if (r == ncclInProgress || r == ncclSuccess)
      r = core::wait_ready(*c, parent->nccl_ctl, b.deadline, b.interrupted());
  }
  c->nccl_ctl = child;
  if (r == ncclSuccess && child != nullptr) r = core::wait_ready(*c, child, b.deadline, b.interrupted());
  if (r == ncclSuccess && child != nullptr) return make_work_comm(c, b.deadline, b.interrupted());
  parent->nccl_shrink_failed = true;  // the next attempt makes a new communicator
  if (!b.heard.ok()) return b.heard;
  if (r == ncclInProgress) return late(b, "ncclCommShrink");
  return core::nccl_failure("ncclCommShrink", *c, r == ncclSuccess ? ncclInternalError : r);
}

// A new NCCL communicator from the id(s) of the new generation.
Status init_nccl(Build& b, const std::vector<uint8_t>& id_bytes) {
  cc_comm* c = b.c;
  std::vector<ncclUniqueId> ids;
  CC_RETURN_IF_ERROR(read_nccl_ids(id_bytes, c->nranks, "the rendezvous", &ids));
  b.made_by = std::string("a new NCCL communicator (") + ctl_init_call(ids.size()) + " from " +
              std::to_string(ids.size()) + " NCCL id" + (ids.size() == 1 ? ")" : "s)");
  const ncclResult_t r = make_ctl_comm(c, ids, b.deadline, b.interrupted());
  if (r == ncclSuccess) return make_work_comm(c, b.deadline, b.interrupted());
  if (!b.heard.ok()) return b.heard;
  if (r == ncclInProgress) return late(b, ctl_init_call(ids.size()));
  return core::nccl_failure(ctl_init_call(ids.size()), *c, r);
}

Status recover(cc_comm* parent, rv::RecoverKind kind, int nranks, int timeout_ms,
               cc_comm_t* newcomm) {
  const auto start = Clock::now();
  const char* call = recover_call(kind);
  const std::string head = std::string(call) + " on " + parent->who();
  if (!parent->client || !parent->rendezvous)
    return make_status(CC_ERR_INVALID_USAGE,
                       head + ": this communicator has no rendezvous connection of its own (it "
                              "was made by cc_comm_split): recover the communicator it was split "
                              "from, then split that again");
  const milliseconds timeout = timeout_ms > 0 ? milliseconds(timeout_ms) : parent->timeout;
  const auto deadline = start + timeout;

  auto c = std::make_unique<cc_comm>();
  c->config = parent->config;
  c->timeout = parent->timeout;
  c->host = parent->host;
  c->pid = parent->pid;
  c->job_id = parent->job_id;
  c->device = parent->device;
  c->comm_number = parent->comm_number;
  c->generation = parent->generation;  // until the rendezvous says which
  c->job_rank = parent->job_rank;
  c->rendezvous = parent->rendezvous;
  const bool embedded = server_in_rank0(*parent->rendezvous, parent->config.rendezvous);
  if (parent->server) {
    // A share of the embedded server, which stays while any communicator needs it.
    const rv::factory::ServerAt& hosted = *parent->rendezvous->server();
    if (Status st = EmbeddedServerRef::acquire(hosted.any(), hosted.port, parent->config.token,
                                               parent->config.tls_server, &c->server);
        !st.ok())
      return make_status(st.code, head + ": " + st.message);
  }
  core::DeviceScope scope(c->device);

  RecoverRequest req;
  req.rendezvous = *parent->rendezvous;
  req.config = parent->config;
  req.info.rank = parent->job_rank;
  req.info.world_size = parent->nranks;
  req.info.comm_number = parent->comm_number;
  req.info.host = parent->host;
  req.info.pid = parent->pid;
  if (Status st = launch::describe_device(parent->rank, parent->host, parent->device, &req.info);
      !st.ok()) {
    discard(c.get());
    return make_status(st.code, head + ": " + st.message);
  }
  req.generation = parent->generation;
  req.seat = parent->seat;
  req.kind = kind;
  req.nranks = nranks;
  // The watchdog may still be aborting the parent's working communicator; it
  // keeps the control communicator for ncclCommShrink once that is done.
  if (kind == rv::RecoverKind::shrink && parent->keep_ctl && parent->abort_requested.load())
    core::wait_abort_done(*parent, deadline);
  const auto asked = Clock::now();
  req.can_shrink = kind == rv::RecoverKind::shrink && parent->keep_ctl &&
                   !parent->nccl_shrink_failed && core::ctl_usable(*parent) &&
                   nccl_comm_shrink() != nullptr;
  req.deadline = deadline;
  RecoverResult result;
  Status st = rendezvous_recover(
      req,
      [&](std::vector<uint8_t>* id_bytes) {
        // The new world's size is the rendezvous's to decide: as many ids as
        // the old (or the asked) size wants; each rank uses at most one per rank.
        const int expected = nranks > 0 ? nranks : parent->nranks;
        return make_nccl_ids(*parent, nccl_ids_to_make(expected, parent->config.nccl_ranks_per_id),
                             id_bytes);
      },
      &result);
  c->client = std::move(result.client);
  if (!st.ok()) {
    discard(c.get());
    return make_status(st.code, head + ": " + st.message);
  }
  const rv::Joined& joined = result.joined;
  c->generation = joined.generation;
  c->rank = joined.rank;
  c->seat = joined.seat;
  c->nranks = static_cast<int>(rv::world_size_of(joined));
  c->recovered_from_failed.assign(joined.failed.begin(), joined.failed.end());
  c->keep_ctl = nccl_shrink_usable(c.get());
  const bool by_shrink = joined.method == rv::RecoverMethod::nccl_shrink;

  // From here the new generation exists on the rendezvous: a failure leaves
  // it cleanly, so this rank counts as alive when the survivors call again.
  auto give_up = [&](const Status& why) {
    if (c->client) (void)c->client->leave_nowait();
    discard(c.get());
    return make_status(why.code, head + ": " + why.message);
  };
  if (c->rank < 0 || c->rank >= c->nranks || (by_shrink && nccl_comm_shrink() == nullptr))
    return give_up(make_status(CC_ERR_RENDEZVOUS,
                               "the rendezvous answered with rank " + std::to_string(c->rank) +
                                   " of " + std::to_string(c->nranks) +
                                   (by_shrink ? " by ncclCommShrink" : "") +
                                   ": is it a cc-rendezvous of the same version?"));
  const auto decided = Clock::now();
  Build build{parent, c.get(), kind, deadline, Status::success()};
  st = by_shrink ? shrink_nccl(build, joined.failed) : init_nccl(build, joined.unique_id);
  if (!st.ok()) return give_up(st);
  const auto built = Clock::now();
  int nccl_rank = -1;
  if (ncclCommUserRank(c->nccl_ctl, &nccl_rank) != ncclSuccess || nccl_rank != c->rank)
    return give_up(make_status(CC_ERR_INTERNAL, "NCCL numbered this rank " +
                                                    std::to_string(nccl_rank) +
                                                    " in the new communicator, the rendezvous " +
                                                    std::to_string(c->rank)));
  if (Status s = alloc_scratch(c.get()); !s.ok()) return give_up(s);
  if (Status s = setup_fast_allreduce(c.get(), deadline); !s.ok()) return give_up(s);
  if (Status s = new_generation_events(*c->client, kind, c->generation); !s.ok()) return give_up(s);
  if (Status s = start_watch(c.get(), embedded); !s.ok()) return give_up(s);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  auto ms = [](Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); };
  log().debug("{}: {} took {} ms waiting for the parent's abort, {} ms at the rendezvous, {} ms "
              "in NCCL, {} ms setting up the rest",
              c->who(), call, ms(asked - start), ms(decided - asked), ms(built - decided),
              ms(Clock::now() - built));
  log().info(
      "{}: communicator ready: rank {} of {}, generation {} ({} from {} ranks; ranks left "
      "out or replaced: {}), by {}, in {} ms",
      c->who(), c->rank, c->nranks, c->generation,
      kind == rv::RecoverKind::shrink ? "shrunk" : "regrown", parent->nranks,
      rank_list(c->recovered_from_failed), build.made_by, took.count());
  *newcomm = c.release();
  return Status::success();
}

}  // namespace

bool nccl_shrink_usable(const cc_comm* c) {
  return c->config.nccl_shrink && c->client != nullptr && nccl_comm_shrink() != nullptr;
}

Status shrink(cc_comm* c, int timeout_ms, cc_comm_t* newcomm) {
  return recover(c, rv::RecoverKind::shrink, 0, timeout_ms, newcomm);
}

Status regrow(cc_comm* c, int nranks, int timeout_ms, cc_comm_t* newcomm) {
  return recover(c, rv::RecoverKind::regrow, nranks, timeout_ms, newcomm);
}

std::vector<int> failed_ranks(const cc_comm* c) {
  if (c->generation > 0) return c->recovered_from_failed;
  if (c->watch && c->watch->channel() != nullptr) return c->watch->channel()->failed_ranks();
  return {};
}

}  // namespace cc::comm
