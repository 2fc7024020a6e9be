// Init failures spread: a communicator's init ends on every rank as soon as
// one rank cannot finish it, with that rank's message, instead of at the
// deadline. The server's rules (the etcd backend keeps rules 2 and 3 in the
// same message, rendezvous/rules/event_rules.hpp; on etcd a joiner whose lease
// expires frees its rank for a claim again, as its join does itself):
//
// 1. A joiner whose connection drops (or is dropped) while its join is
//    pending fails the generation: every other pending joiner, and every
//    later joiner of that generation, gets CC_ERR_PEER_FAILED naming the
//    lost rank (host, pid) and how its connection ended. A server that stops
//    is no such loss (it answers everyone itself).
// 2. A member that sends InitFailed is announced to every other member of
//    the job, once, as PeerEvent init_failed carrying its own message; its
//    later drop is not announced again. InitFailed from a connection whose
//    join is still pending fails that generation as in rule 1.
// 3. Every announced failure of a member (init failed, connection dropped,
//    heartbeats missed, abort) fails the reachability test (preflight.cpp)
//    of each of its generations that is still undecided: every request
//    parked in it is answered with CC_ERR_PEER_FAILED naming the member and
//    its message (rules/preflight_rules.hpp), and so is every later one.
//
// Members waiting in NCCL's init hear rule 2's and 3's events on their
// connection (lib/comm/init_listener.cpp) and stop within a poll interval.
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/rules/event_rules.hpp"
#include "rendezvous/rules/preflight_rules.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::member_who;

bool ServerCore::Impl::on_init_failed(Conn& c, uint32_t rid, const InitFailed& m) {
  Job& job = *c.job;
  const std::string reason = rules::init_failed_reason(m.reason);
  if (membership_of(c, m.comm_number) == nullptr) {
    // Still joining: the generation cannot complete without this rank.
    const std::vector<uint64_t> ids(c.parked.begin(), c.parked.end());
    for (uint64_t id : ids) {
      auto it = parked.find(id);
      if (it == parked.end() || it->second.kind != Parked::Kind::join ||
          it->second.comm_number != m.comm_number)
        continue;
      CommJoin& gen = job.comm_joins[m.comm_number];
      std::string who = cc::who(it->second.rank, c.hello.host, c.hello.pid);
      if (auto s = gen.slots.find(it->second.rank); s != gen.slots.end() && s->second.conn == c.id)
        who = member_who(s->second.info);
      fail_join(job, m.comm_number, gen, CC_ERR_PEER_FAILED,
                rules::init_failed_while_joining_words(
                    who, rules::communicator_where(job.id, m.comm_number), reason));
      send(c.id, rid, Ok{});
      return true;
    }
    send_error(c.id, rid, CC_ERR_INVALID_USAGE,
               c.who() + " reported an init failure for " +
                   rules::communicator_where(job.id, m.comm_number) +
                   ", which it has not joined; report it after the join");
    return true;
  }
  log().warn("{}: {} could not start: {}", rules::communicator_where(job.id, m.comm_number),
             c.who(), printable(reason));
  if (!c.announced) announce(job, c, PeerEventKind::init_failed, reason);
  send(c.id, rid, Ok{});
  return true;
}

// Rule 1: the connection is going while its join is pending.
void ServerCore::Impl::joiner_lost(Conn& c, const std::string& reason) {
  Job& job = *c.job;
  const std::vector<uint64_t> ids(c.parked.begin(), c.parked.end());
  for (uint64_t id : ids) {
    auto it = parked.find(id);
    if (it == parked.end() || it->second.kind != Parked::Kind::join) continue;
    const uint32_t comm_number = it->second.comm_number;
    const int32_t rank = it->second.rank;
    auto g = job.comm_joins.find(comm_number);
    if (g == job.comm_joins.end() || g->second.state != CommJoin::State::joining) continue;
    CommJoin& gen = g->second;
    std::string who = cc::who(rank, c.hello.host, c.hello.pid);
    if (auto s = gen.slots.find(rank); s != gen.slots.end() && s->second.conn == c.id)
      who = member_who(s->second.info);
    const int32_t joined = gen.joined;
    // Its own join goes unanswered: its connection is gone.
    cancel_parked(id);
    fail_join(job, comm_number, gen, CC_ERR_PEER_FAILED,
              who + " was lost while joining " + rules::communicator_where(job.id, comm_number) +
                  " (" + std::to_string(joined) + " of " + std::to_string(gen.world_size) +
                  " ranks had joined): " + reason +
                  ". It crashed, was killed or lost its network: look at its output; "
                  "the other ranks stop instead of waiting for a rank that is gone");
  }
}

// Rule 3: a member's failure ends the undecided reachability tests of its
// generations.
void ServerCore::Impl::init_failure_spread(Job& job, Conn& c, PeerEventKind kind,
                                           const std::string& reason) {
  for (const Membership& m : c.memberships) {
    auto g = job.comm_joins.find(m.comm_number);
    if (g == job.comm_joins.end() || g->second.preflight.decided()) continue;
    preflight_fail(
        job, g->second, CC_ERR_PEER_FAILED,
        rules::preflight_member_failed_words(kind, cc::who(m.rank, m.host, m.pid), reason));
  }
}

}  // namespace cc::rv
