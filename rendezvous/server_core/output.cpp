// Everything the rendezvous server's core tells its Sink: answers and errors
// to one connection, dropping a connection (an error, a log line, then
// forget), announcing a member's failure, abort or failed init to the other
// members of its generation of its communicator (once per connection, at
// most ServerCore::kMaxAnnouncedFailures ranks per generation; later ones are
// logged only) and ending its generations' undecided reachability tests, and
// telling the I/O layer that a job has no member and no joiner left.
#include <string>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::quote;

void ServerCore::Impl::send(ConnId c, uint32_t rid, const Message& m) { sink.send(c, rid, m); }

void ServerCore::Impl::send_error(ConnId c, uint32_t rid, cc_result_t code, std::string words) {
  sink.send(c, rid, Error{static_cast<uint32_t>(code), std::move(words)});
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

void ServerCore::Impl::maybe_idle(Job& job) {
  if (job.members.empty() && job.joiners == 0) sink.job_idle(job.id);
}

}  // namespace cc::rv
