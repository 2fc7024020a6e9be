// The calls of a communicator made by cc_comm_split, compared among its own
// members: a child has no connection of its own, so its points come in its
// parent's heartbeats, marked with the split (Heartbeat::split) and the
// member's rank in the child. Each child (parent generation, split, color)
// has its own rule, apart from the parent's, so a difference on the child
// never flags the parent, nor the parent's the child. Only the members that
// reported to a child are told (the server does not know the others' colors);
// one that reports after the difference is told then. Points it wants are
// asked of the child's ranks that reported, on their parent's connection.
// How the child's end is compared: split_ends.cpp.
#include "rendezvous/server_core/state.hpp"

namespace cc::rv {

void ServerCore::Impl::check_split_calls(Job& job, const Conn& c, const Membership& member,
                                         const Heartbeat& h) {
  const SplitKey key{h.comm_number, h.generation, h.split, h.split_color};
  Job::SplitCallCheck& s = split_check(job, key);
  const bool new_reporter = s.reporters.insert(c.id).second;
  if (s.verdict) {
    if (new_reporter) send(c.id, 0, *s.verdict);
    return;
  }
  s.by_rank[h.split_rank] = c.id;
  s.parent_rank[h.split_rank] = member.rank;
  const std::optional<rules::CallMismatch> m =
      s.check.report({h.split_rank, member.host, member.pid, h.calls, h.answers});
  if (m) return tell_split_differ(job, key, s, *m, member);
  settle_split(job, key, s);
}

}  // namespace cc::rv
