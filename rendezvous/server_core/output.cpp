// Everything the rendezvous server's core tells its Sink: answers and errors
// to one connection, dropping a connection (an error, a log line, then
// forget), announcing a member's failure or abort to the other members of its
// job (once per connection, at most ServerCore::kMaxAnnouncedFailures ranks
// per job; later ones are logged only), and telling the I/O layer that a job
// has no member and no joiner left.
#include <string>

#include "common/log.hpp"
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
  log().warn("dropping {}: {}", c.who(), reason);
  forget(c, reason, true);
}

void ServerCore::Impl::announce(Job& job, Conn& c, PeerEventKind kind, const std::string& reason) {
  c.announced = true;
  const char* what = kind == PeerEventKind::aborted ? "aborted" : "failed";
  if (job.announced >= ServerCore::kMaxAnnouncedFailures) {
    log().warn("job {}: {} {}: {} (not announced: the job already had {} failures)", quote(job.id),
               c.who(), what, reason, job.announced);
    return;
  }
  ++job.announced;
  log().warn("job {}: {} {}: {}; telling {} other members", quote(job.id), c.who(), what, reason,
             job.members.size() - (job.members.count(c.id) ? 1 : 0));
  for (const Membership& m : c.memberships) {
    PeerEvent ev{kind, m.rank, m.host, m.pid, reason};
    for (ConnId other : job.members)
      if (other != c.id) send(other, 0, ev);
  }
}

void ServerCore::Impl::maybe_idle(Job& job) {
  if (job.members.empty() && job.joiners == 0) sink.job_idle(job.id);
}

}  // namespace cc::rv
