#include "lib/comm/rendezvous_recover.hpp"

#include <algorithm>

#include "common/who.hpp"
#include "lib/comm/deadline.hpp"
#include "lib/comm/rendezvous_join.hpp"

namespace cc::comm {

using std::chrono::milliseconds;

const char* recover_call(rv::RecoverKind kind) {
  return kind == rv::RecoverKind::shrink ? "cc_comm_shrink" : "cc_comm_regrow";
}

Status rendezvous_recover(const RecoverRequest& req, const rv::Membership::MakeId& make_id,
                          RecoverResult* out) {
  const std::string where = req.rendezvous.where();
  // A connection of its own (on etcd, a lease of its own). The rendezvous is
  // up (this rank talked to it): no long retries.
  if (Status st = connect_member(req.rendezvous, req.config,
                                 std::min(remaining(req.deadline), milliseconds(10000)),
                                 "cc " CC_VERSION_STRING " recover", &out->client);
      !st.ok()) {
    // Where rank 0 may host the server, it may have died with it.
    const std::string hosted =
        req.rendezvous.server()
            ? ". Where the server lived in rank 0 (embedded) and rank 0 died, the job cannot "
              "recover: run it under cc-run or with cc-rendezvous"
            : "";
    return make_status(st.code, "cannot reach the job's rendezvous at " + where +
                                    " again: " + st.message + hosted);
  }
  rv::Recover r;
  r.info = req.info;
  r.generation = req.generation;
  r.kind = req.kind;
  r.nranks = req.kind == rv::RecoverKind::regrow ? req.nranks : 0;
  r.can_shrink = req.can_shrink;
  r.seat = req.seat;
  r.timeout_ms = static_cast<uint32_t>(remaining(req.deadline).count());
  return out->client->recover(r, make_id, &out->joined);
}

Status new_generation_events(rv::Membership& membership, rv::RecoverKind kind,
                             uint32_t generation) {
  membership.pump();
  while (auto e = membership.next_event(milliseconds(0))) {
    if (e->kind == rv::PeerEventKind::left) continue;
    if (e->kind == rv::PeerEventKind::server_stopping)
      return make_status(CC_ERR_PEER_FAILED, "the rendezvous server went away while generation " +
                                                 std::to_string(generation) +
                                                 " was being made: " + e->reason);
    const std::string peer = who(Who{e->rank, e->host, e->pid, static_cast<int>(generation)});
    return make_status(
        CC_ERR_PEER_FAILED,
        peer + (e->kind == rv::PeerEventKind::aborted ? " aborted" : " failed") +
            " while the new communicator was being made (" + e->reason + "); call " +
            recover_call(kind) + " again on the same communicator: the rendezvous decides anew");
  }
  return Status::success();
}

}  // namespace cc::comm
