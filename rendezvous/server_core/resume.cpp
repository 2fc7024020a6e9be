// Failover: a successor server (ServerOptions::successor) rebuilds the
// communicators of the server that went away from what their members tell
// it. The rules:
//
// 1. A client that lost its server sends, on its new connection, one Resume
//    per membership it held: the communicator, its generation, the member's
//    rank and job rank there, the world size, its MemberInfo, its heartbeat
//    window, its last completed operation and the generation's NCCL ids.
// 2. The first Resume of a communicator makes it: complete, of that
//    generation and world size, with those ids. Each later one must agree
//    on all three, else it is refused as a mismatch. A seat resumed by a
//    connection that still holds it is refused; one whose connection ended
//    since is failed (a successor cannot tell a blip from a death either).
// 3. A resumed member is a member as after its join: watched by its window
//    from the resume on, announced when its connection drops, its calls
//    compared afresh.
// 4. For resume_grace from the server's start nobody is declared failed for
//    not having resumed. Once every rank resumed, or at the end of the grace
//    period, the communicator's Lineage (recovery.hpp) is made from the
//    members; the ranks that never resumed are failed, announced to the
//    others in one event (the first, `with` the rest) as a lost node's ranks
//    are, so survivors can shrink on this server. A Resume after that is
//    refused.
// 5. A join the old server was still waiting for completes on this one when
//    its ranks send their Joins again (a fresh join). A Join of a generation
//    0 whose members are resuming completed on the old server before its
//    Joined arrived: it takes its seat as a Resume would, and is answered
//    with the generation's Joined.
// 6. A Recover of a communicator that has no Lineage yet waits for it, then
//    is decided as any other (recovery.cpp): the recovery the old server had
//    in progress is decided once, from the Recovers sent again.
// 7. In a job that was read back (its keys or sessions were in the durable
//    store), a Join of a communicator that has no Lineage yet and is not
//    resuming as a generation 0 waits through the grace period: it may be a
//    replacement cc-run started for a rank that died with the old server,
//    arriving before (or among) the survivors' Resumes. Once the
//    communicator is rebuilt it is handled as a Join on any server (a
//    replacement, recovery.cpp); a communicator nobody resumed is joined
//    anew at the end of the grace period; one that resumes as a generation
//    0 takes the held Joins as in 5.
//
// The job ranks of members that never resumed are not told by anyone: in a
// generation where every member that resumed has rank = job rank (a join, a
// regrow) theirs are their ranks, else each is counted on from the resumed
// member below it, which keeps their order (a shrink numbers densely in
// job-rank order).
#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/rules/join_rules.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::lineage_where;
using server_core::quote;
using server_core::rank_ranges;
using server_core::Resumed;
using server_core::Resuming;

namespace {

std::string id_words(const std::vector<uint8_t>& id) {
  return std::to_string(id.size()) + " bytes of NCCL id";
}

std::string member_words(const Resume& r) { return cc::who(r.rank, r.info.host, r.info.pid); }

}  // namespace

void ServerCore::Impl::open_resume_grace(Clock::time_point now) {
  if (grace_armed || !opt.successor) return;
  grace_armed = true;
  arm(resume_grace_timer, now + opt.resume_grace, DeadlineKind::resume_grace, 0);
}

bool ServerCore::Impl::on_resume(Conn& c, uint32_t rid, const Resume& r, Clock::time_point now) {
  if (auto refused = take_seat(c, r, now)) {
    log().warn("job {}: refusing the resume of {}: {}", quote(c.job->id), member_words(r),
               printable(refused->words));
    send_error(c.id, rid, refused->code, refused->words);
    return true;
  }
  send(c.id, rid, Ok{});
  // A generation 0 resuming: the Joins held before it was known take their seats.
  const uint32_t g = r.info.comm_number;
  if (auto rit = c.job->resuming.find(g); rit != c.job->resuming.end() && rit->second.known &&
                                           rit->second.generation == 0 &&
                                           !rit->second.held_joins.empty()) {
    std::vector<Resuming::HeldJoin> joins = std::move(rit->second.held_joins);
    rit->second.held_joins.clear();
    c.job->joiners -= joins.size();
    release_joins(*c.job, std::move(joins));
  }
  return true;
}

std::optional<rules::Refusal> ServerCore::Impl::take_seat(Conn& c, const Resume& r,
                                                          Clock::time_point now) {
  Job& job = *c.job;
  const uint32_t g = r.info.comm_number;
  const std::string where = lineage_where(job.id, g, r.generation);
  const std::string me = member_words(r) + " of " + where;
  if (!opt.successor)
    return rules::Refusal{
        CC_ERR_RENDEZVOUS,
        me + " asked to resume on a rendezvous server that takes no resumes (it was not "
             "started as the successor of another): point the client's locator at the server "
             "that took over"};
  for (const Membership& m : c.memberships)
    if (m.comm_number == g)
      return rules::Refusal{CC_ERR_INVALID_USAGE,
                            me + " resumed on a connection that is already a member of "
                                 "communicator " + std::to_string(g) + " (a client bug)"};
  auto rit = job.resuming.find(g);
  if (rit == job.resuming.end() || !rit->second.known) {
    if (job.lineages.count(g) != 0 || grace_over)
      return rules::Refusal{
          CC_ERR_PEER_FAILED,
          me + " came after the rendezvous server rebuilt that communicator from the ranks that "
               "resumed within its grace period of " +
              std::to_string(opt.resume_grace.count()) +
              " ms: the rank counts as failed; the others go on without it (cc_comm_shrink) "
              "or with a replacement (cc_comm_regrow)"};
    if (auto gen = job.comm_joins.find(g); gen != job.comm_joins.end())
      return rules::Refusal{
          CC_ERR_MISMATCH, me + " resumed a communicator that ranks are joining anew on this "
                                "server: some ranks saw its join complete on the server that "
                                "went away, others did not; restart the job"};
  }
  Resuming& rs = job.resuming[g];
  if (!rs.known) {
    rs.known = true;
    rs.generation = r.generation;
    rs.world_size = r.world_size;
    rs.unique_id = r.unique_id;
    log().info("{}: rebuilding it from its members' resumes, first {} of {} ranks",
               where, member_words(r), r.world_size);
  } else if (rs.generation != r.generation || rs.world_size != r.world_size ||
             rs.unique_id != r.unique_id) {
    const Resumed& first = rs.members.begin()->second;
    return rules::Refusal{
        CC_ERR_MISMATCH,
        member_words(r) + " resumes communicator " + std::to_string(g) + " of job " +
            quote(job.id) + " as generation " + std::to_string(r.generation) + " of " +
            std::to_string(r.world_size) + " ranks with " + id_words(r.unique_id) + ", but " +
            cc::who(rs.members.begin()->first, first.info.host, first.info.pid) +
            " resumed it as generation " + std::to_string(rs.generation) + " of " +
            std::to_string(rs.world_size) + " ranks with " + id_words(rs.unique_id) +
            ": the ranks disagree on what they are members of; restart the job"};
  }
  if (auto seat = rs.members.find(r.rank); seat != rs.members.end()) {
    const Resumed& s = seat->second;
    if (s.state == Resumed::State::live)
      return rules::Refusal{
          CC_ERR_MISMATCH,
          me + ": its seat is already resumed by " +
              cc::who(r.rank, s.info.host, s.info.pid) +
              " on a connection that still holds it; two processes claim one rank: check the "
              "ranks' RANK and the job id"};
    return rules::Refusal{
        CC_ERR_PEER_FAILED,
        me + ": its seat was resumed before and " +
            (s.state == Resumed::State::left ? std::string("left") : "failed (" + s.why + ")") +
            "; the rank cannot come back into this generation"};
  }
  // Job ranks grow with ranks (a join, a shrink's dense numbering, a regrow).
  auto above = rs.members.upper_bound(r.rank);
  const bool below_ok = above == rs.members.begin() ||
                        std::prev(above)->second.info.rank < r.info.rank;
  const bool above_ok = above == rs.members.end() || r.info.rank < above->second.info.rank;
  if (r.info.rank < r.rank || !below_ok || !above_ok)
    return rules::Refusal{
        CC_ERR_MISMATCH,
        me + " says it joined as job rank " + std::to_string(r.info.rank) +
            ", which does not fit the job ranks of the ranks that resumed before it (they grow "
            "with the ranks of a generation): the ranks disagree on what they are members of; "
            "restart the job"};
  Resumed& seat = rs.members[r.rank];
  seat.info = r.info;
  seat.seat = r.seat;
  seat.conn = c.id;
  c.memberships.push_back(
      {g, r.rank, r.info.host, r.info.pid, r.last_completed, r.generation, r.info.rank});
  job.members.insert(c.id);
  job.ranks.insert(c.id);
  c.asked_window = std::chrono::milliseconds(r.heartbeat_window_ms);
  c.last_heartbeat = now;
  if (heartbeat_window(c).count() > 0)
    arm(c.heartbeat_timer, now + heartbeat_window(c), DeadlineKind::heartbeat, c.id);
  CommJoin& gen = job.comm_joins[g];
  gen.state = CommJoin::State::complete;
  gen.world_size = r.world_size;
  Slot& slot = gen.slots[r.rank];
  slot.conn = c.id;
  slot.info = r.info;
  slot.info.rank = r.rank;
  slot.info.world_size = r.world_size;
  slot.last_completed = r.last_completed;
  gen.joined = static_cast<int32_t>(rs.members.size());
  ++counters.joins;
  log().debug("{}: {} resumed ({} of {})", where, member_words(r), rs.members.size(),
              rs.world_size);
  if (static_cast<int32_t>(rs.members.size()) == rs.world_size) rebuild(job, g);
  return std::nullopt;
}

bool ServerCore::Impl::resume_join(Conn& c, uint32_t rid, const Join& j, Clock::time_point now) {
  Job& job = *c.job;
  const Resuming& rs = job.resuming.at(j.info.comm_number);
  if (rs.generation != 0 || rs.world_size != j.info.world_size || j.info.rank >= rs.world_size) {
    send_error(c.id, rid, CC_ERR_MISMATCH,
               rules::late_join_words(j.info, rules::communicator_where(job.id,
                                                                        j.info.comm_number)) +
                   ", which its members are resuming on this server as generation " +
                   std::to_string(rs.generation) + " of " + std::to_string(rs.world_size) +
                   " ranks; restart the job");
    return true;
  }
  Resume r;
  r.info = j.info;
  r.generation = 0;
  r.rank = j.info.rank;
  r.world_size = j.info.world_size;
  r.heartbeat_window_ms = static_cast<uint32_t>(c.asked_window.count());
  r.unique_id = rs.unique_id;
  // Its answer is built before the seat is taken: taking the last seat makes
  // the Lineage and ends the resuming.
  Joined joined;
  joined.unique_id = rs.unique_id;
  joined.world_size = static_cast<uint32_t>(rs.world_size);
  joined.rank = j.info.rank;
  if (auto first = rs.members.find(0); first != rs.members.end())
    joined.members.push_back({0, first->second.info.host, first->second.info.pid});
  else if (j.info.rank == 0)
    joined.members.push_back({0, j.info.host, j.info.pid});
  else
    joined.members.push_back({0, "", 0});
  if (auto refused = take_seat(c, r, now)) {
    send_error(c.id, rid, refused->code, refused->words);
    return true;
  }
  send(c.id, rid, joined);
  return true;
}

void ServerCore::Impl::hold_recover(Conn& c, uint32_t rid, const Recover& r) {
  Job& job = *c.job;
  job.resuming[r.info.comm_number].held.push_back({c.id, rid, r});
  ++job.joiners;
  job.ranks.insert(c.id);
  log().info("{}: {} waits until the communicator is rebuilt from its members' resumes",
             lineage_where(job.id, r.info.comm_number, r.generation),
             server_core::member_who(r.info));
}

bool ServerCore::Impl::holds_join(const Job& job, uint32_t g) const {
  if (!taking_resumes() || !job.restored || job.lineages.count(g) != 0) return false;
  if (auto rit = job.resuming.find(g); rit != job.resuming.end() && rit->second.known)
    return rit->second.generation != 0;
  return job.comm_joins.count(g) == 0;  // else it is being joined anew here
}

void ServerCore::Impl::hold_join(Conn& c, uint32_t rid, const Join& j) {
  Job& job = *c.job;
  job.resuming[j.info.comm_number].held_joins.push_back({c.id, rid, j});
  ++job.joiners;
  job.ranks.insert(c.id);
  log().info("{}: {} joins while the server that took over waits for its members' resumes; "
             "its join waits until the communicator is rebuilt or the grace period ends",
             rules::communicator_where(job.id, j.info.comm_number), server_core::member_who(j.info));
}

void ServerCore::Impl::release_joins(Job& job, std::vector<Resuming::HeldJoin> joins) {
  for (const Resuming::HeldJoin& h : joins) {
    auto it = conns.find(h.conn);
    if (it == conns.end() || it->second->job != &job) continue;
    on_join(*it->second, h.request_id, h.request, current_time);
  }
}

void ServerCore::Impl::resumed_conn_ends(Job& job, const Conn& c, bool failed,
                                         const std::string& reason) {
  for (const Membership& m : c.memberships) {
    auto rit = job.resuming.find(m.comm_number);
    if (rit == job.resuming.end()) continue;
    auto seat = rit->second.members.find(m.rank);
    if (seat == rit->second.members.end() || seat->second.conn != c.id) continue;
    seat->second.conn = 0;
    seat->second.state = failed ? Resumed::State::failed : Resumed::State::left;
    seat->second.why = reason;
  }
}

void ServerCore::Impl::end_resume_grace() {
  grace_over = true;
  size_t rebuilt = 0;
  std::vector<Job*> all;
  all.reserve(jobs.size());
  for (auto& [id, job] : jobs) all.push_back(job.get());
  for (Job* job : all) {
    std::vector<uint32_t> comms;
    for (const auto& [g, rs] : job->resuming) comms.push_back(g);
    for (uint32_t g : comms) {
      if (jobs.count(job->id) == 0) break;  // forgotten meanwhile
      rebuild(*job, g);
      ++rebuilt;
    }
  }
  log().info("the grace period for resumes ended ({} ms); {} communicator(s) rebuilt at its end",
             opt.resume_grace.count(), rebuilt);
}

void ServerCore::Impl::rebuild(Job& job, uint32_t g) {
  auto rit = job.resuming.find(g);
  if (rit == job.resuming.end()) return;
  Resuming rs = std::move(rit->second);
  job.resuming.erase(rit);
  job.joiners -= rs.held.size() + rs.held_joins.size();
  if (rs.known) {
    const std::string where = lineage_where(job.id, g, rs.generation);
    bool identity = true;
    for (const auto& [rank, m] : rs.members) identity = identity && m.info.rank == rank;
    std::vector<MemberInfo> seats;
    std::vector<int32_t> missing;
    seats.reserve(static_cast<size_t>(rs.world_size));
    int32_t below_rank = -1;
    int32_t below_job_rank = -1;
    for (int32_t rank = 0; rank < rs.world_size; ++rank) {
      if (auto m = rs.members.find(rank); m != rs.members.end()) {
        seats.push_back(m->second.info);
        below_rank = rank;
        below_job_rank = m->second.info.rank;
        continue;
      }
      MemberInfo info;
      info.rank = identity ? rank : below_job_rank + (rank - below_rank);
      info.world_size = rs.world_size;
      info.comm_number = g;
      seats.push_back(info);
      missing.push_back(rank);
    }
    server_core::Lineage& l = job.lineages[g];
    l = server_core::Lineage{};
    l.rules.start(job.id, g, rs.generation, seats);
    const std::string absent =
        "did not resume on the rendezvous server that took over within its grace period of " +
        std::to_string(opt.resume_grace.count()) +
        " ms (its process, its host or its network is likely gone)";
    for (size_t rank = 0; rank < seats.size(); ++rank) {
      const int32_t job_rank = seats[rank].rank;
      auto m = rs.members.find(static_cast<int32_t>(rank));
      const bool live = m != rs.members.end() && m->second.state == Resumed::State::live;
      l.seats[job_rank].open = live ? 1 : 0;
      if (m != rs.members.end()) l.seats[job_rank].secret = m->second.seat;
      if (m == rs.members.end())
        l.rules.set_state(job_rank, rules::SeatState::dead, absent);
      else if (m->second.state == Resumed::State::failed)
        l.rules.set_state(job_rank, rules::SeatState::dead, m->second.why);
      else if (m->second.state == Resumed::State::left)
        l.rules.set_state(job_rank, rules::SeatState::gone);
    }
    CommJoin& gen = job.comm_joins[g];
    for (int32_t rank : missing) {
      Slot& slot = gen.slots[rank];
      slot.info = seats[static_cast<size_t>(rank)];
      slot.info.rank = rank;
      slot.ended = MemberState::failed;
      slot.end_reason = absent;
    }
    log().info("{}: rebuilt from {} of {} ranks{}", where, rs.members.size(), rs.world_size,
               missing.empty() ? std::string()
                               : std::string(missing.size() == 1 ? "; rank " : "; ranks ") +
                                     rank_ranges(missing) + " never resumed");
    if (!missing.empty()) {
      // As a lost node's ranks are told (output.cpp, announce_together).
      size_t& told = job.announced[{g, rs.generation}];
      if (told < ServerCore::kMaxAnnouncedFailures) {
        ++told;
        PeerEvent ev{PeerEventKind::failed, missing.front(), "", 0,
                     (missing.size() == 1 ? "rank " : "ranks ") + rank_ranges(missing) + " " +
                         absent};
        for (size_t i = 1; i < missing.size() && ev.with.size() < kMaxPeerEventWith; ++i)
          ev.with.push_back(missing[i]);
        size_t others = 0;
        for (ConnId id : job.members) {
          auto it = conns.find(id);
          if (it == conns.end()) continue;
          for (const Membership& om : it->second->memberships) {
            if (om.comm_number != g || om.generation != rs.generation) continue;
            send(id, 0, ev);
            ++others;
            break;
          }
        }
        log().warn("{}: ranks {} failed: {}; told {} other members", where,
                   rank_ranges(missing), absent, others);
      }
    }
  }
  for (const Resuming::Held& h : rs.held) {
    auto it = conns.find(h.conn);
    if (it == conns.end() || it->second->job != &job) continue;
    on_recover(*it->second, h.request_id, h.request, current_time);
  }
  // A replacement's Join finds the Lineage now (recovery.cpp, on_replacement).
  release_joins(job, std::move(rs.held_joins));
}

}  // namespace cc::rv
