// The calls of a communicator made by cc_comm_split, compared among its own
// members: a child has no connection of its own, so its points come in its
// parent's heartbeats, marked with the split (Heartbeat::split) and the
// member's rank in the child. Each child (parent generation, split, color)
// has its own rule, apart from the parent's, so a difference on the child
// never flags the parent, nor the parent's the child. Only the members that
// reported to a child are told (the server does not know the others' colors);
// one that reports after the difference is told then. Points it wants are
// asked of the child's ranks that reported, on their parent's connection.
#include "common/log.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::quote;

void ServerCore::Impl::check_split_calls(Job& job, const Conn& c, const Membership& member,
                                         const Heartbeat& h) {
  auto& checks = job.split_call_checks;
  const auto key = std::make_tuple(h.comm_number, h.generation, h.split, h.split_color);
  auto [it, made] = checks.try_emplace(key);
  if (made && checks.size() > Job::kMaxSplitChecks) {
    checks.erase(checks.begin() == it ? std::next(checks.begin()) : checks.begin());
  }
  Job::SplitCallCheck& s = it->second;
  const bool new_reporter = s.reporters.insert(c.id).second;
  if (s.verdict) {
    if (new_reporter) send(c.id, 0, *s.verdict);
    return;
  }
  s.by_rank[h.split_rank] = c.id;
  const std::optional<rules::CallMismatch> m =
      s.check.report({h.split_rank, member.host, member.pid, h.calls, h.answers});
  if (!m) {
    if (const std::optional<rules::CallsWant> w = s.check.take_want()) {
      const CallsWanted wanted{h.comm_number, h.generation, h.split,  h.split_color,
                               w->id,         w->after,     w->through};
      for (int32_t rank : w->ranks)
        if (auto r = s.by_rank.find(rank); r != s.by_rank.end() && conns.count(r->second) != 0)
          send(r->second, 0, wanted);
    }
    return;
  }
  s.verdict = PeerEvent{
      PeerEventKind::mismatch, m->rank, member.host, member.pid, m->words, h.split, h.split_color};
  for (ConnId id : s.reporters)
    if (conns.count(id) != 0) send(id, 0, *s.verdict);
  log().warn(
      "job {}: communicator {} (generation {}), its split {} (color {}): {}; told {} members",
      quote(job.id), h.comm_number, h.generation, h.split, h.split_color, m->words,
      s.reporters.size());
}

}  // namespace cc::rv
