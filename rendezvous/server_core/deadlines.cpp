// Every deadline of the rendezvous server lives in one ordered map, so the
// I/O layer needs one timer (ServerCore::next_deadline). arm and disarm keep
// a connection's or a parked request's Timer in step with that map; expire
// fires what is due, in time order: a handshake that did not finish, a frame
// that stalled halfway, a member silent for longer than its heartbeat window
// (dropped and announced), a parked request that timed out (parked.cpp), an
// idle connection that holds nothing, a job without a connection whose
// TTL passed (retention.cpp), the next turn of a Set's answers to its
// waiters (parked.cpp), and the end of a successor's grace period for
// resumes (resume.cpp).
#include <string>

#include "common/log.hpp"
#include "rendezvous/server_core/state.hpp"

namespace cc::rv {

void ServerCore::Impl::arm(Timer& t, Clock::time_point at, DeadlineKind kind, uint64_t id) {
  disarm(t);
  t = deadlines.emplace(at, DeadlineRef{kind, id});
}

void ServerCore::Impl::disarm(Timer& t) {
  if (t) deadlines.erase(*t);
  t.reset();
}

// At most a turn's budget of deadlines fire per call; the next call takes
// the rest (next_deadline() is then already due).
void ServerCore::Impl::expire(Clock::time_point now) {
  start_turn(now);
  open_resume_grace(now);
  while (!deadlines.empty() && deadlines.begin()->first <= now && turn_budget > 0 &&
         !turn_spent()) {
    const DeadlineRef ref = deadlines.begin()->second;
    deadlines.erase(deadlines.begin());
    if (ref.kind == DeadlineKind::wake) {
      continue_wake(ref.id);
      continue;
    }
    if (ref.kind == DeadlineKind::reap) {
      reap_orphans();
      continue;
    }
    if (ref.kind == DeadlineKind::resume_grace) {
      resume_grace_timer.reset();
      end_resume_grace();
      continue;
    }
    --turn_budget;
    if (ref.kind == DeadlineKind::parked) {
      expire_parked(ref.id);
      continue;
    }
    if (ref.kind == DeadlineKind::job_ttl) {
      expire_job(ref.id);
      continue;
    }
    auto it = conns.find(ref.id);
    if (it == conns.end()) continue;
    Conn& c = *it->second;
    if (ref.kind == DeadlineKind::handshake) {
      c.handshake_timer.reset();
      counters.limit(LimitKind::handshake_timeout);
      drop(c, 0, CC_ERR_RENDEZVOUS,
           "no " + std::string(c.phase == Phase::auth ? "authentication" : "hello") + " within " +
               std::to_string(opt.handshake_timeout.count()) +
               " ms of connecting (handshake deadline)");
    } else if (ref.kind == DeadlineKind::input) {
      c.input_timer.reset();
      bool frame_ended = false;
      if (take_frames(c, &frame_ended, now)) after_frames(c, frame_ended, now);
    } else if (ref.kind == DeadlineKind::idle) {
      c.idle_timer.reset();
      expire_idle(c, now);
    } else if (ref.kind == DeadlineKind::frame) {
      c.frame_timer.reset();
      counters.frame_error(FrameErrorKind::stalled);
      drop(c, 0, CC_ERR_RENDEZVOUS,
           "a frame stalled: " + std::to_string(c.reader.buffered()) +
               " bytes of an incomplete frame for " + std::to_string(opt.frame_timeout.count()) +
               " ms (frame deadline)");
    } else {
      c.heartbeat_timer.reset();
      c.heartbeat_lost = true;
      drop(c, 0, CC_SUCCESS,
           "no heartbeat for " + std::to_string(heartbeat_window(c).count()) +
               " ms (host down, process stopped or network cut)");
    }
  }
}

// An idle connection holds nothing (no membership, pending join or parked
// request) and sent no frame for idle_timeout; one that holds something is
// looked at again later.
void ServerCore::Impl::expire_idle(Conn& c, Clock::time_point now) {
  const auto silent_until = c.last_frame + opt.idle_timeout;
  const bool carries_ranks = c.link && !c.link->channels.empty();
  if (!c.memberships.empty() || !c.parked.empty() || !c.waiting.empty() || carries_ranks ||
      now < silent_until) {
    arm(c.idle_timer, now < silent_until ? silent_until : now + opt.idle_timeout,
        DeadlineKind::idle, c.id);
    return;
  }
  counters.limit(LimitKind::idle_timeout);
  drop(c, 0, CC_ERR_RENDEZVOUS,
       "idle for " + std::to_string(opt.idle_timeout.count()) +
           " ms without a request, membership or pending wait (idle deadline); reconnect when "
           "needed");
}

}  // namespace cc::rv
