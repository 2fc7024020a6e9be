#include "lib/comm/rendezvous_recover.hpp"

#include <algorithm>

#include "common/who.hpp"
#include "lib/comm/deadline.hpp"
#include "lib/comm/rendezvous_join.hpp"
#include "lib/launch/etcd.hpp"

namespace cc::comm {

using std::chrono::milliseconds;

const char* recover_call(rv::RecoverKind kind) {
  return kind == rv::RecoverKind::shrink ? "cc_comm_shrink" : "cc_comm_regrow";
}

Status rendezvous_recover(const RecoverRequest& req, const rv::Client::MakeId& make_id,
                          RecoverResult* out) {
  const bool on_etcd = launch::is_etcd_address(req.addr);
  const std::string where = on_etcd ? req.addr : req.addr + ":" + std::to_string(req.port);
  rv::Recover r;
  r.info = req.info;
  r.generation = req.generation;
  r.kind = req.kind;
  r.nranks = req.kind == rv::RecoverKind::regrow ? req.nranks : 0;
  r.can_shrink = req.can_shrink;
  if (on_etcd) {  // a connection of its own: a lease of its own
    if (Status st = connect_etcd_member(req.addr, req.config, req.deadline, &out->client);
        !st.ok())
      return make_status(st.code, "cannot reach the job's etcd rendezvous at " + where + " again: " +
                                      st.message);
    r.timeout_ms = static_cast<uint32_t>(remaining(req.deadline).count());
    return out->client->recover(r, make_id, &out->joined);
  }
  rv::ClientOptions options;
  options.addr = req.addr;
  options.port = req.port;
  options.job_id = req.config.job_id;
  options.token = req.config.token;
  options.client = "cc " CC_VERSION_STRING " recover";
  // The server is up (this rank talked to it): no long retries.
  options.connect_timeout = std::min(remaining(req.deadline), milliseconds(10000));
  options.request_timeout = std::min(milliseconds(req.config.timeout_ms), milliseconds(10000));
  options.agent_socket = req.config.agent_socket;
  if (Status st = rv::Client::connect(options, &out->client); !st.ok())
    return make_status(st.code,
                       "cannot reach the job's rendezvous at " + where + " again: " + st.message +
                           ". Where the server lived in rank 0 (embedded) and rank 0 died, the "
                           "job cannot recover: run it under cc-run or with cc-rendezvous");
  r.timeout_ms = static_cast<uint32_t>(remaining(req.deadline).count());
  return out->client->recover(r, make_id, &out->joined);
}

Status new_generation_events(rv::Client& client, rv::RecoverKind kind, uint32_t generation) {
  client.pump();
  while (auto e = client.next_event(milliseconds(0))) {
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
