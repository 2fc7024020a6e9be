// A split child's calls compared up to their last, as it ends: each of its
// members' CallsEnd (split > 0) comes on its parent's connection, keyed as
// the child's heartbeat lines are (split_calls.cpp), and waits until every
// rank of the child (its size comes with the CallsEnd) has ended or is gone.
// A child rank is gone with its parent membership (a death, a leave), once
// the server knows which parent rank it is (from its heartbeats or its
// CallsEnd); one it never heard from is waited for until the member's own
// deadline. The verdict goes to the child's members alone: an Error
// (CC_ERR_MISMATCH) to those that wait, a mismatch PeerEvent marked with
// the split to those still running; agreement is an Ok.
#include <algorithm>
#include <set>

#include "common/log.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::quote;

server_core::Job::SplitCallCheck& ServerCore::Impl::split_check(Job& job, SplitKey key) {
  auto& checks = job.split_call_checks;
  auto [it, made] = checks.try_emplace(key);
  if (made && checks.size() > Job::kMaxSplitChecks) {
    // The oldest goes first, but not one whose members wait for its verdict.
    for (auto old = checks.begin(); old != checks.end(); ++old) {
      if (old == it || !old->second.enders.empty()) continue;
      checks.erase(old);
      break;
    }
  }
  return it->second;
}

bool ServerCore::Impl::on_split_calls_end(Job& job, Conn& c, uint32_t rid,
                                          const Membership& member, const CallsEnd& e) {
  const SplitKey key{e.comm_number, e.generation, e.split, e.split_color};
  Job::SplitCallCheck& s = split_check(job, key);
  s.reporters.insert(c.id);
  s.by_rank[e.split_rank] = c.id;
  s.parent_rank[e.split_rank] = member.rank;
  s.nranks = std::max(s.nranks, e.split_ranks);
  if (s.verdict) {  // told before this member ended
    send(c.id, rid, Error{static_cast<uint32_t>(CC_ERR_MISMATCH), s.verdict->reason});
    return true;
  }
  Job::CallEnder& ender = s.enders[e.split_rank];
  ender.conn = c.id;
  ender.rid = rid;
  ender.waiting = true;
  const rules::CallReport report{e.split_rank, member.host, member.pid, e.calls, e.answers};
  if (std::optional<rules::CallMismatch> m = s.check.end(report, e.last, e.last_replay))
    tell_split_differ(job, key, s, *m, member);
  else
    settle_split(job, key, s);
  return true;
}

void ServerCore::Impl::tell_split_differ(Job& job, SplitKey key, Job::SplitCallCheck& s,
                                         const rules::CallMismatch& m, const Membership& named) {
  const auto& [comm_number, generation, split, color] = key;
  s.verdict = PeerEvent{PeerEventKind::mismatch, m.rank, named.host, named.pid, m.words,
                        split,                   color};
  std::set<ConnId> waiting;
  for (auto& [rank, e] : s.enders) {
    if (!e.waiting) continue;
    send(e.conn, e.rid, Error{static_cast<uint32_t>(CC_ERR_MISMATCH), m.words});
    e.waiting = false;
    waiting.insert(e.conn);
  }
  s.enders.clear();
  size_t told = waiting.size();
  for (ConnId id : s.reporters) {
    if (waiting.count(id) != 0 || conns.count(id) == 0) continue;
    send(id, 0, *s.verdict);
    ++told;
  }
  log().warn(
      "job {}: communicator {} (generation {}), its split {} (color {}): {}; told {} members",
      quote(job.id), comm_number, generation, split, color, m.words, told);
}

void ServerCore::Impl::settle_split(Job& job, SplitKey key, Job::SplitCallCheck& s) {
  rules::CallCheck& check = s.check;
  const std::optional<rules::CallsWant> fresh = check.take_want();
  if (const std::optional<rules::CallsWant>& w = check.pending_want()) {
    const CallsWanted wanted{std::get<0>(key), std::get<1>(key), std::get<2>(key),
                             std::get<3>(key), w->id,            w->after,
                             w->through};
    for (int32_t rank : w->ranks) {
      if (auto e = s.enders.find(rank); e != s.enders.end()) {
        if (!e->second.waiting || e->second.sent_want == w->id) continue;
        send(e->second.conn, e->second.rid, wanted);
        e->second.waiting = false;  // it answers with another CallsEnd
        e->second.sent_want = w->id;
      } else if (fresh) {
        if (auto r = s.by_rank.find(rank); r != s.by_rank.end() && conns.count(r->second) != 0)
          send(r->second, 0, wanted);
      }
    }
  }
  if (s.enders.empty() || check.diverged()) return;
  if (!check.finishing()) {
    for (int32_t rank = 0; rank < s.nranks; ++rank)
      if (s.enders.count(rank) == 0 && s.gone.count(rank) == 0) return;  // not ended yet
    if (std::optional<rules::CallMismatch> m = check.finish()) {
      const Membership* named = nullptr;
      if (auto r = s.by_rank.find(m->rank); r != s.by_rank.end())
        if (auto conn = conns.find(r->second); conn != conns.end())
          for (const Membership& om : conn->second->memberships)
            if (om.comm_number == std::get<0>(key) && om.generation == std::get<1>(key))
              named = &om;
      return tell_split_differ(job, key, s, *m, named != nullptr ? *named : Membership{});
    }
    return settle_split(job, key, s);  // finish() may want points
  }
  if (check.pending_want()) return;
  for (auto& [rank, e] : s.enders)
    if (e.waiting) send(e.conn, e.rid, Ok{});
  s.enders.clear();
}

void ServerCore::Impl::split_member_gone(Job& job, CallKey key, int32_t parent_rank) {
  for (auto& [split_key, s] : job.split_call_checks) {
    if (std::get<0>(split_key) != key.first || std::get<1>(split_key) != key.second) continue;
    for (const auto& [child_rank, in_parent] : s.parent_rank) {
      if (in_parent != parent_rank || !s.gone.insert(child_rank).second) continue;
      s.enders.erase(child_rank);
      if (s.verdict) continue;
      if (std::optional<rules::CallMismatch> m = s.check.gone(child_rank)) {
        tell_split_differ(job, split_key, s, *m, Membership{});
        continue;
      }
      if (!s.enders.empty()) settle_split(job, split_key, s);
    }
  }
}

}  // namespace cc::rv
