// Everything the rendezvous server's core tells its Sink: answers and errors
// to one connection, dropping a connection (an error, a log line, then
// forget), announcing a member's failure, abort or failed init to the other
// members of its generation of its communicator (once per connection, at
// most ServerCore::kMaxAnnouncedFailures ranks per generation; later ones are
// logged only) and ending its generations' undecided reachability tests, and
// telling the I/O layer that a job has no member and no joiner left.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "rendezvous/rules/words.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::quote;

// A rank behind a node agent is answered through the agent (relay.cpp).
void ServerCore::Impl::send(ConnId c, uint32_t rid, const Message& m) {
  if (!is_channel(c)) {
    if (agent_links > 0)
      if (auto it = conns.find(c); it != conns.end() && it->second->link)
        count_unwritten(*it->second, m, rid);
    return sink.send(c, rid, m);
  }
  uint32_t channel = 0;
  if (AgentLink* link = relay_of(c, &channel))
    relay_append(conns.at(c)->agent, *link, channel, RelayOp::frames,
                 [&](std::vector<uint8_t>& out) { append_frame(out, rid, m); });
}

void ServerCore::Impl::send_value(ConnId c, uint32_t rid, std::span<const uint8_t> value) {
  if (!is_channel(c)) return sink.send_value(c, rid, value);
  uint32_t channel = 0;
  if (AgentLink* link = relay_of(c, &channel))
    relay_append(conns.at(c)->agent, *link, channel, RelayOp::frames,
                 [&](std::vector<uint8_t>& out) { append_value_frame(out, rid, value); });
}

void ServerCore::Impl::close(ConnId c, const std::string& reason) {
  if (is_channel(c)) return relay_close(c, reason);
  sink.close(c, reason);
}

void ServerCore::Impl::send_error(ConnId c, uint32_t rid, cc_result_t code, std::string words) {
  send(c, rid, Error{static_cast<uint32_t>(code), std::move(words)});
}

// Sends Error (when code != success), logs and forgets the connection.
void ServerCore::Impl::drop(Conn& c, uint32_t rid, cc_result_t code, const std::string& reason) {
  if (code != CC_SUCCESS) send_error(c.id, rid, code, reason);
  log().warn("dropping {}: {}", c.who(), printable(reason));
  forget(c, reason, true);
}

// Each membership is announced to the other members of its own generation
// of its communicator: a survivor's new generation does not hear of a parent
// that goes away.
void ServerCore::Impl::announce(Job& job, Conn& c, PeerEventKind kind, const std::string& reason) {
  c.announced = true;
  init_failure_spread(job, c, kind, reason);
  const char* what = kind == PeerEventKind::aborted       ? "aborted"
                     : kind == PeerEventKind::init_failed ? "could not start"
                                                          : "failed";
  record_end(job, c, kind == PeerEventKind::aborted ? MemberState::aborted : MemberState::failed,
             reason);
  bool counted = false;  // one failure per member, however many generations it held
  for (const Membership& m : c.memberships) {
    size_t& told = job.announced[{m.comm_number, m.generation}];
    if (told >= ServerCore::kMaxAnnouncedFailures) {
      log().warn(
          "job {}: {} {}: {} (not announced: generation {} of communicator {} already had "
          "{} failures)",
          quote(job.id), c.who(), what, printable(reason), m.generation, m.comm_number, told);
      continue;
    }
    ++told;
    if (!counted) count_failure(c, kind);
    counted = true;
    PeerEvent ev{kind, m.rank, m.host, m.pid, reason};
    size_t others = 0;
    for (ConnId other : job.members) {
      auto it = conns.find(other);
      if (other == c.id || it == conns.end()) continue;
      for (const Membership& om : it->second->memberships) {
        if (om.comm_number != m.comm_number || om.generation != m.generation) continue;
        send(other, 0, ev);
        ++others;
        break;
      }
    }
    log().warn("job {}: {} {}: {}; told {} other members", quote(job.id), c.who(), what,
               printable(reason), others);
  }
}

void ServerCore::Impl::announce_together(Job& job, const std::vector<Conn*>& gone,
                                         const std::string& reason) {
  // The members of each generation that go, in rank order.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<const Membership*>> by_generation;
  std::unordered_set<ConnId> going;
  for (Conn* c : gone) {
    c->announced = true;
    going.insert(c->id);
    init_failure_spread(job, *c, PeerEventKind::failed, reason);
    record_end(job, *c, MemberState::failed, reason);
    count_failure(*c, PeerEventKind::failed);
    for (const Membership& m : c->memberships)
      by_generation[{m.comm_number, m.generation}].push_back(&m);
  }
  for (auto& [generation, members] : by_generation) {
    std::sort(members.begin(), members.end(),
              [](const Membership* a, const Membership* b) { return a->rank < b->rank; });
    size_t& told = job.announced[generation];
    if (told >= ServerCore::kMaxAnnouncedFailures) {
      log().warn("job {}: {} ranks of communicator {} (generation {}) failed together: {} (not "
                 "announced: it already had {} failures)",
                 quote(job.id), members.size(), generation.first, generation.second,
                 printable(reason), told);
      continue;
    }
    ++told;
    const Membership& first = *members.front();
    PeerEvent ev{PeerEventKind::failed, first.rank, first.host, first.pid, reason};
    for (size_t i = 1; i < members.size() && ev.with.size() < kMaxPeerEventWith; ++i)
      ev.with.push_back(members[i]->rank);
    size_t others = 0;
    for (ConnId other : job.members) {
      if (going.count(other) != 0) continue;
      auto it = conns.find(other);
      if (it == conns.end()) continue;
      for (const Membership& om : it->second->memberships) {
        if (om.comm_number != generation.first || om.generation != generation.second) continue;
        send(other, 0, ev);
        ++others;
        break;
      }
    }
    std::vector<int32_t> ranks;
    for (const Membership* m : members) ranks.push_back(m->rank);
    log().warn("job {}: ranks {} of communicator {} (generation {}) failed together: {}; told {} "
               "other members",
               quote(job.id), rules::rank_ranges(ranks), generation.first, generation.second,
               printable(reason), others);
  }
}

void ServerCore::Impl::maybe_idle(Job& job) {
  if (job.members.empty() && job.joiners == 0) sink.job_idle(job.id);
}

}  // namespace cc::rv
