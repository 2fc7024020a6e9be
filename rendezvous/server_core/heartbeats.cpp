// What members tell the rendezvous server about their health, and what they
// ask about each other's. Heartbeat carries the last operation a member
// completed and pushes its heartbeat deadline on; HeartbeatWindow sets the silence it
// may keep before it is dropped and announced as failed (0: no window);
// ProgressQuery answers with one rank's progress, or with the others that
// are furthest behind (at most kMaxProgressMembers); Abort announces the rank
// as aborted and fails any generation it was still joining.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/who.hpp"
#include "rendezvous/rules/event_rules.hpp"
#include "rendezvous/rules/words.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::member_who;
using server_core::quote;

// The silence a member may keep: what it asked for in HeartbeatWindow, else
// the server's option. A rank behind a node agent lives as long as its
// process and its agent: the agent says when the one exits, and the agent's
// own window covers it, so it has none of its own.
std::chrono::milliseconds ServerCore::Impl::heartbeat_window(const Conn& c) const {
  if (c.agent != 0) return std::chrono::milliseconds(0);
  return c.asked_window.count() > 0 ? c.asked_window : opt.heartbeat_timeout;
}

bool ServerCore::Impl::on_heartbeat(Conn& c, uint32_t rid, const Heartbeat& h,
                                    Clock::time_point now) {
  for (Membership& ms : c.memberships) ms.last_completed = h.last_completed;
  c.last_heartbeat = now;
  if (c.heartbeat_timer)
    arm(c.heartbeat_timer, now + heartbeat_window(c), DeadlineKind::heartbeat, c.id);
  // A rank behind a node agent got its acknowledgement from the agent.
  if (c.agent == 0) send(c.id, rid, HeartbeatAck{});
  // A split child's heartbeat (split > 0) is sent with its parent's progress.
  if ((!h.calls.empty() || h.answers != 0) && c.job != nullptr) check_calls(*c.job, c, h);
  return true;
}

// The calls a member reported are compared with its generation's other
// ranks'; the first difference is told to every member of that generation,
// the ranks named included, and their watchdogs abort (call_ends.cpp).
void ServerCore::Impl::check_calls(Job& job, const Conn& c, const Heartbeat& h) {
  const Membership* member = nullptr;
  for (const Membership& m : c.memberships)
    if (m.comm_number == h.comm_number && m.generation == h.generation) member = &m;
  if (member == nullptr) return;  // not (or no longer) a member of that generation
  if (h.split != 0) return check_split_calls(job, c, *member, h);
  const CallKey key{h.comm_number, h.generation};
  rules::CallCheck& check = call_check(job, key);
  if (check.diverged()) return;
  const std::optional<rules::CallMismatch> m =
      check.report({member->rank, member->host, member->pid, h.calls, h.answers});
  if (m) return tell_calls_differ(job, key, *m);
  settle_calls(job, key);
}

// Every live member of a generation by its last reported collective, as text.
std::string ServerCore::Impl::where_calls_are(const Job& job, uint32_t comm_number,
                                              uint32_t generation) const {
  auto check = job.call_checks.find({comm_number, generation});
  if (check == job.call_checks.end()) return "";
  std::vector<rules::RankCall> ranks;
  for (ConnId id : job.members) {
    auto it = conns.find(id);
    if (it == conns.end()) continue;
    for (const Membership& m : it->second->memberships) {
      if (m.comm_number != comm_number || m.generation != generation) continue;
      auto last = check->second.last_calls().find(m.rank);
      ranks.push_back(last != check->second.last_calls().end() ? last->second
                                                               : rules::RankCall{m.rank, 0, {}});
    }
  }
  return rules::positions_words(ranks);
}

bool ServerCore::Impl::on_heartbeat_window(Conn& c, uint32_t rid, const HeartbeatWindow& w,
                                           Clock::time_point now) {
  c.asked_window = std::chrono::milliseconds(w.window_ms);
  c.last_heartbeat = now;
  if (c.asked_window.count() > 0 && c.agent == 0)  // a rank behind an agent: see heartbeat_window
    arm(c.heartbeat_timer, now + c.asked_window, DeadlineKind::heartbeat, c.id);
  else
    disarm(c.heartbeat_timer);
  send(c.id, rid, Ok{});
  return true;
}

// One rank, or the others furthest behind: O(members) work, a small answer.
bool ServerCore::Impl::on_progress(Conn& c, uint32_t rid, const ProgressQuery& q,
                                   Clock::time_point now) {
  // Who holds which rank, on which host and pid, is for the job's members.
  if (c.memberships.empty()) {
    send_error(c.id, rid, CC_ERR_INVALID_USAGE,
               "a progress query for " + rules::communicator_where(c.job->id, q.comm_number) +
                   " from " + c.who() +
                   ", which is no member of the job: only a member's connection may ask who is "
                   "behind; an operator asks with `cc-rendezvous status`");
    return true;
  }
  Progress out;
  uint64_t lowest = std::numeric_limits<uint64_t>::max();
  for (ConnId id : c.job->members) {
    auto it = conns.find(id);
    if (it == conns.end() || (q.rank < 0 && id == c.id)) continue;
    const Conn& member = *it->second;
    const auto silent =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - member.last_heartbeat);
    for (const Membership& m : member.memberships) {
      if (m.comm_number != q.comm_number || m.generation != q.generation ||
          (q.rank >= 0 && m.rank != q.rank))
        continue;
      if (q.rank < 0) {
        if (m.last_completed > lowest) continue;
        if (m.last_completed < lowest) out.members.clear();
        lowest = m.last_completed;
        if (out.members.size() >= kMaxProgressMembers) continue;
      }
      out.members.push_back({m.rank, m.host, m.pid, m.last_completed,
                             static_cast<uint32_t>(std::clamp<int64_t>(
                                 silent.count(), 0, std::numeric_limits<uint32_t>::max()))});
    }
  }
  std::sort(out.members.begin(), out.members.end(),
            [](const MemberProgress& a, const MemberProgress& b) { return a.rank < b.rank; });
  if (q.with_calls) out.calls = where_calls_are(*c.job, q.comm_number, q.generation);
  send(c.id, rid, out);
  return true;
}

bool ServerCore::Impl::on_abort(Conn& c, uint32_t rid, const Abort& a) {
  Job& job = *c.job;
  const std::string reason = rules::abort_reason(a.reason);
  if (!c.memberships.empty() && !c.announced) announce(job, c, PeerEventKind::aborted, reason);
  // A pending join fails its whole generation: nobody waits for an aborted rank.
  const std::vector<uint64_t> ids(c.parked.begin(), c.parked.end());
  for (uint64_t id : ids) {
    auto it = parked.find(id);
    if (it != parked.end() && it->second.kind == Parked::Kind::join) {
      const uint32_t comm_number = it->second.comm_number;
      const int32_t rank = it->second.rank;
      CommJoin& gen = job.comm_joins[comm_number];
      std::string who = cc::who(rank, {});
      if (auto slot = gen.slots.find(rank); slot != gen.slots.end())
        who = member_who(slot->second.info);
      fail_join(job, comm_number, gen, CC_ERR_ABORTED,
                rules::aborted_while_joining_words(
                    who, rules::communicator_where(job.id, comm_number), reason));
    }
  }
  send(c.id, rid, Ok{});
  return true;
}

}  // namespace cc::rv
