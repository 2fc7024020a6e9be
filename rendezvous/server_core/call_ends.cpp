// The ranks' calls compared up to their last, as a communicator ends: each
// member's CallsEnd brings its points not yet sent and the number of its
// last collective, and waits. Once every live member of the generation has
// sent its own (one that leaves or is gone is not waited for), the rule
// (rules::CallCheck) compares where they ended too; where reports left a
// gap before a difference, it asks the ranks concerned for their points in
// between (CallsWanted: the answer to a waiting CallsEnd, or pushed to a
// member still running, whose heartbeat answers). The verdict goes to every
// live member of the generation: an Error (CC_ERR_MISMATCH) to those that
// wait, a mismatch PeerEvent to the others; agreement is an Ok.
#include "common/log.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::quote;

rules::CallCheck& ServerCore::Impl::call_check(Job& job, CallKey key) {
  return job.call_checks.try_emplace(key, true).first->second;
}

ServerCore::Impl::Conn* ServerCore::Impl::member_conn(Job& job, CallKey key, int32_t rank,
                                                      const Membership** m) {
  for (ConnId id : job.members) {
    auto it = conns.find(id);
    if (it == conns.end()) continue;
    for (const Membership& om : it->second->memberships)
      if (om.comm_number == key.first && om.generation == key.second && om.rank == rank) {
        if (m != nullptr) *m = &om;
        return it->second.get();
      }
  }
  return nullptr;
}

bool ServerCore::Impl::on_calls_end(Conn& c, uint32_t rid, const CallsEnd& e,
                                    Clock::time_point now) {
  const Membership* member = nullptr;
  for (const Membership& m : c.memberships)
    if (m.comm_number == e.comm_number && m.generation == e.generation) member = &m;
  if (member == nullptr || c.job == nullptr) {  // not (or no longer) a member: nothing to compare
    send(c.id, rid, Ok{});
    return true;
  }
  Job& job = *c.job;
  if (e.split != 0) return on_split_calls_end(job, c, rid, *member, e);
  const CallKey key{e.comm_number, e.generation};
  // Its watchdog stopped: its silence until the verdict is no death.
  if (c.heartbeat_timer && c.agent == 0)
    arm(c.heartbeat_timer, now + std::chrono::milliseconds(e.timeout_ms) + heartbeat_window(c),
        DeadlineKind::heartbeat, c.id);
  Job::CallEnder& ender = job.call_enders[key][member->rank];
  ender.conn = c.id;
  ender.rid = rid;
  ender.waiting = true;
  rules::CallCheck& check = call_check(job, key);
  const rules::CallReport report{member->rank, member->host, member->pid, e.calls, e.answers};
  if (std::optional<rules::CallMismatch> m = check.end(report, e.last, e.last_replay))
    tell_calls_differ(job, key, *m);
  else
    settle_calls(job, key);
  return true;
}

void ServerCore::Impl::send_wants(Job& job, CallKey key, rules::CallCheck& check) {
  const std::optional<rules::CallsWant> fresh = check.take_want();
  const std::optional<rules::CallsWant>& w = check.pending_want();
  if (!w) return;
  const CallsWanted wanted{key.first, key.second, 0, 0, w->id, w->after, w->through};
  auto ending = job.call_enders.find(key);
  for (int32_t rank : w->ranks) {
    Job::CallEnder* e = nullptr;
    if (ending != job.call_enders.end())
      if (auto it = ending->second.find(rank); it != ending->second.end()) e = &it->second;
    if (e != nullptr) {
      if (!e->waiting || e->sent_want == w->id) continue;
      send(e->conn, e->rid, wanted);
      e->waiting = false;  // it answers with another CallsEnd
      e->sent_want = w->id;
    } else if (fresh) {
      if (Conn* c = member_conn(job, key, rank)) send(c->id, 0, wanted);
    }
  }
}

void ServerCore::Impl::tell_calls_differ(Job& job, CallKey key, const rules::CallMismatch& m) {
  const Membership* named = nullptr;
  member_conn(job, key, m.rank, &named);
  const PeerEvent ev{PeerEventKind::mismatch, m.rank, named ? named->host : std::string(),
                     named ? named->pid : 0u, m.words};
  auto ending = job.call_enders.find(key);
  size_t told = 0;
  for (ConnId id : job.members) {
    auto it = conns.find(id);
    if (it == conns.end()) continue;
    for (const Membership& om : it->second->memberships) {
      if (om.comm_number != key.first || om.generation != key.second) continue;
      Job::CallEnder* e = nullptr;
      if (ending != job.call_enders.end())
        if (auto it2 = ending->second.find(om.rank); it2 != ending->second.end()) e = &it2->second;
      if (e == nullptr) {
        send(id, 0, ev);
      } else if (e->waiting) {
        send(e->conn, e->rid, Error{static_cast<uint32_t>(CC_ERR_MISMATCH), m.words});
        e->waiting = false;
      }
      ++told;
      break;
    }
  }
  log().warn("job {}: communicator {} (generation {}): {}; told {} members", quote(job.id),
             key.first, key.second, m.words, told);
}

void ServerCore::Impl::settle_calls(Job& job, CallKey key) {
  auto found = job.call_checks.find(key);
  if (found == job.call_checks.end()) return;
  rules::CallCheck& check = found->second;
  send_wants(job, key, check);
  auto ending = job.call_enders.find(key);
  if (ending == job.call_enders.end()) return;
  auto& enders = ending->second;
  if (check.diverged()) {  // told before this member ended
    for (auto& [rank, e] : enders) {
      if (!e.waiting) continue;
      send(e.conn, e.rid, Error{static_cast<uint32_t>(CC_ERR_MISMATCH), check.verdict()->words});
      e.waiting = false;
    }
    return;
  }
  if (enders.empty()) return;
  if (!check.finishing()) {
    for (ConnId id : job.members) {
      auto it = conns.find(id);
      if (it == conns.end()) continue;
      for (const Membership& om : it->second->memberships)
        if (om.comm_number == key.first && om.generation == key.second &&
            enders.count(om.rank) == 0)
          return;  // a live member has not ended yet
    }
    if (std::optional<rules::CallMismatch> m = check.finish()) return tell_calls_differ(job, key, *m);
    send_wants(job, key, check);
  }
  if (check.pending_want()) return;
  for (auto& [rank, e] : enders)
    if (e.waiting) send(e.conn, e.rid, Ok{});
  job.call_enders.erase(key);
}

void ServerCore::Impl::calls_member_gone(Job& job, CallKey key, int32_t rank) {
  split_member_gone(job, key, rank);
  if (auto e = job.call_enders.find(key); e != job.call_enders.end()) e->second.erase(rank);
  auto found = job.call_checks.find(key);
  if (found == job.call_checks.end()) return;
  if (std::optional<rules::CallMismatch> m = found->second.gone(rank))
    return tell_calls_differ(job, key, *m);
  settle_calls(job, key);
}

}  // namespace cc::rv
