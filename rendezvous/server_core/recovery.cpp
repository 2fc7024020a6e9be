// Recovery: the server decides each generation of a communicator after a
// failure, so no two ranks can disagree on who goes on. The rules (any
// rendezvous backend must follow the same ones; docs/FAILURES.md repeats them):
//
// 1. A communicator (a job's join number g) gets generation 0 when its join
//    completes; its members are the processes that joined, by job rank (the
//    rank each joined with). A process is named by (job rank, host, pid).
// 2. A process of the current generation is dead once one of its
//    connections holding a membership of g ends without Leave (a crash, a
//    kill, a drop for silence). It is gone, not dead, once it holds no such
//    connection after leaving cleanly. Abort does not make it dead: an
//    aborted rank may still take part in the recovery.
// 3. Survivors send Recover (shrink, or regrow to nranks) on a new
//    connection. Every live member of the current generation must send it;
//    dead and gone ones are left out. All must ask for the same thing (same
//    kind, same nranks), else every one of them gets a mismatch. A rank that
//    is dead, or not a member of the current generation, is refused as stale.
//    A rank whose last attempt failed after the membership was decided
//    recovers from the generation it was given (it is a member of it).
// 4. Shrink: the next generation holds the survivors, ranks renumbered
//    densely in job-rank order. Regrow: it holds ranks 0..nranks-1, each a
//    survivor keeping its job rank or a replacement; the server waits until
//    every hole has one.
// 5. A replacement is a process that Joins generation 0 of g after it
//    completed, with the rank of a member that is dead or gone (or of a rank
//    the current generation lacks). It waits until a regrow takes it, or its
//    own deadline. A Join for a rank that is alive in the current generation
//    is refused at once as stale, as is a second replacement for one rank.
// 6. The id: when every survivor can still serve ncclCommShrink and the
//    recovery is a shrink, none is needed (method nccl_shrink, excluding the
//    failed ranks). Else a replacement for rank 0 brings one from its Join,
//    or the survivor with the lowest job rank is asked for one
//    (RecoverIdWanted, answered by RecoverId) before anything is decided; if
//    it goes meanwhile, the next is asked.
// 7. Once all are in (and the id), every member gets the same Joined (but
//    its own rank): the new rank 0 and the world size (each member works
//    the list out: rules::next_generation_members), the generation (one
//    more), the previous generation's ranks it leaves out or replaces
//    (`failed`), the method and the id. Its connection becomes its membership of the new
//    generation. Failures are announced only to members of the same generation.
// 8. A member that dies before that is left out (the decision waits for
//    nobody dead). One that dies after it fails the new generation as any
//    failure does: its members are told and recover again, from it.
// 9. At the first participant's deadline every participant gets the same
//    message: who did not call, which ranks never got a replacement, whether
//    the id never came. A replacement's own deadline names the regrow that
//    never came. Jobs never see each other's state.
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::Lineage;
using server_core::member_who;
using server_core::quote;
using server_core::rank_ranges;
using server_core::Replacement;
using server_core::Seat;

namespace {

const auto call_name = server_core::recover_call_name;
const auto call_words = server_core::recover_call_words;

// How the rules see a seat from its connections: alive while one of them
// holds a membership, else gone (dead, once declared, the rules keep).
rules::SeatState state_of(const Seat& s) {
  return s.open > 0 ? rules::SeatState::alive : rules::SeatState::gone;
}

bool same_process(const MemberInfo* a, const std::string& host, uint32_t pid) {
  return a != nullptr && a->host == host && a->pid == pid;
}

bool same_secret(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return false;
  uint8_t diff = 0;  // in constant time: a guess learns nothing from the time
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

void ServerCore::Impl::start_lineage(Job& job, uint32_t comm_number, const CommJoin& gen) {
  Lineage& l = job.lineages[comm_number];
  l = Lineage{};
  std::vector<MemberInfo> members;
  members.reserve(gen.slots.size());
  for (const auto& [rank, slot] : gen.slots) {
    members.push_back(slot.info);
    l.seats[rank].open = 1;
    l.seats[rank].secret = make_nonce();
  }
  l.rules.start(job.id, comm_number, 0, std::move(members));
}

bool ServerCore::Impl::on_recover(Conn& c, uint32_t rid, const Recover& r, Clock::time_point now) {
  Job& job = *c.job;
  const uint32_t g = r.info.comm_number;
  const std::string me = member_who(r.info);
  const std::string call = call_name(r.kind);
  auto lit = job.lineages.find(g);
  // A communicator still resuming on a successor: it waits for its Lineage.
  if (lit == job.lineages.end() && (taking_resumes() || job.resuming.count(g) != 0)) {
    hold_recover(c, rid, r);
    return true;
  }
  if (lit == job.lineages.end()) {
    send_error(c.id, rid, CC_ERR_INVALID_USAGE,
               call + " by " + me + ": communicator " + std::to_string(g) + " of job " +
                   quote(job.id) +
                   " never completed its join on this rendezvous server, so it has nothing to "
                   "recover; check MASTER_ADDR, MASTER_PORT and the job id");
    return true;
  }
  Lineage& l = lit->second;
  bool recovering = !c.memberships.empty();

  for (uint64_t id : c.parked) {
    auto p = parked.find(id);
    recovering = recovering || (p != parked.end() && p->second.kind == Parked::Kind::recover);
  }
  if (recovering) {
    send_error(c.id, rid, CC_ERR_INVALID_USAGE, rules::own_connection_words(r.kind, r.info));
    return true;
  }
  if (r.generation > l.rules.generation()) {
    send_error(c.id, rid, CC_ERR_MISMATCH,
               call + " by " + me + " names generation " + std::to_string(r.generation) + " of " +
                   "communicator " + std::to_string(g) + " of job " + quote(job.id) +
                   ", but the rendezvous knows generation " + std::to_string(l.rules.generation()) +
                   " as the latest: is another server serving this job?");
    return true;
  }
  if (auto refused = not_the_holder(job, l, r)) {
    log().warn("{}: refusing {}: {}", l.rules.where(), me, printable(refused->words));
    send_error(c.id, rid, refused->code, refused->words);
    return true;
  }
  if (auto refused = l.rules.call(r.info, r.kind, r.nranks, r.can_shrink)) {
    send_error(c.id, rid, refused->refusal.code, refused->refusal.words);
    if (refused->ends_attempt)
      fail_recovery(job, g, l, refused->refusal.code, refused->refusal.words);
    return true;
  }
  if (l.rules.callers() == 1) {  // the first call of an attempt
    l.id_maker = -1;
    l.unique_id.clear();
  }
  const uint64_t id =
      park(c, Parked::of(Parked::Kind::recover, rid, job, r.timeout_ms, g, r.info.rank), now);
  ++job.joiners;
  job.ranks.insert(c.id);  // this connection holds the job's communicator state too
  Seat& seat = l.seats[r.info.rank];
  seat.parked = id;
  seat.conn = c.id;
  log().info("{}: {} called {} ({} still awaited)", l.rules.where(), l.rules.seat_who(r.info.rank),
             call_words(r.kind, r.nranks), l.rules.awaited());
  job.unsettled.insert(g);
  settle(job);
  return true;
}

// A Recover in a member's place must come from its process: it brings the
// seat its Joined handed out (host and pid are no proof), and it names no
// generation older than one its process holds a membership of (a replay).
std::optional<rules::Refusal> ServerCore::Impl::not_the_holder(const Job& job, const Lineage& l,
                                                               const Recover& r) const {
  const std::string me = member_who(r.info);
  auto s = l.seats.find(r.info.rank);
  if (s == l.seats.end()) return std::nullopt;  // not a member: the rules say it is stale
  if (!s->second.secret.empty() && !same_secret(s->second.secret, r.seat))
    return rules::Refusal{
        CC_ERR_MISMATCH,
        std::string(call_name(r.kind)) + " by " + me + " on " + l.rules.where() +
            (r.seat.empty() ? " brings no proof that it holds rank " : " brings a wrong proof "
                                                                       "that it holds rank ") +
            std::to_string(r.info.rank) +
            "'s seat: only the process that joined as that rank (or was given it by a "
            "recovery) may recover in its place. Is another process using this job id, or a cc "
            "older than the rendezvous server? Give each job an id of its own and one cc "
            "version"};
  if (r.generation < l.rules.generation())
    for (ConnId id : job.members) {
      auto c = conns.find(id);
      if (c == conns.end()) continue;
      for (const Membership& m : c->second->memberships)
        if (m.comm_number == r.info.comm_number && m.job_rank == r.info.rank &&
            m.generation > r.generation)
          return rules::Refusal{
              CC_ERR_MISMATCH,
              std::string(call_name(r.kind)) + " by " + me + " names generation " +
                  std::to_string(r.generation) + " of " + l.rules.where() +
                  ", but that rank's process is a member of generation " +
                  std::to_string(m.generation) +
                  " and has not left it: the request is stale (sent again from an older "
                  "communicator); recover from the latest one"};
    }
  return std::nullopt;
}

bool ServerCore::Impl::on_recover_id(Conn& c, uint32_t rid, const RecoverId& m,
                                     Clock::time_point now) {
  Job& job = *c.job;
  for (auto& [g, l] : job.lineages) {
    if (l.last_id_maker == c.id && !l.rules.pending()) {
      send_error(c.id, rid, static_cast<cc_result_t>(l.last_failure_code),
                 "the recovery this rank was making the NCCL id for is over: " + l.last_failure);
      return true;
    }
    if (!l.rules.pending() || l.id_maker < 0) continue;
    Seat& seat = l.seats.at(l.id_maker);
    if (seat.conn != c.id || seat.parked != 0) continue;
    if (m.unique_id.empty() || m.generation != l.rules.generation() + 1) {
      send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
                 "a recover-id for generation " + std::to_string(m.generation) + " with " +
                     std::to_string(m.unique_id.size()) + " bytes of id; " +
                     rules::lineage_where(job.id, g, l.rules.generation() + 1) +
                     " wants a non-empty one (a client bug)");
      return true;
    }
    l.unique_id = m.unique_id;
    seat.parked =
        park(c, Parked::of(Parked::Kind::recover, rid, job, m.timeout_ms, g, l.id_maker), now);
    ++job.joiners;
    job.unsettled.insert(g);
    settle(job);
    return true;
  }
  send_error(c.id, rid, CC_ERR_INVALID_USAGE,
             "a recover-id on a connection no recovery asked for an id (a client bug)");
  return true;
}

bool ServerCore::Impl::on_replacement(Conn& c, uint32_t rid, const Join& j, Clock::time_point now) {
  Job& job = *c.job;
  const uint32_t g = j.info.comm_number;
  Lineage& l = job.lineages.at(g);
  const int32_t r = j.info.rank;
  const std::string late = rules::late_join_words(j.info, rules::communicator_where(job.id, g));
  if (auto refused = l.rules.replacement(j.info, late, j.unique_id)) {
    send_error(c.id, rid, refused->code, refused->words);
    return true;
  }
  Parked p = Parked::of(Parked::Kind::recover, rid, job, j.timeout_ms, g, r);
  p.replacement = true;
  const uint64_t id = park(c, std::move(p), now);
  ++job.joiners;
  l.replacements[r] = Replacement{c.id, id};
  log().info("{}: {} waits as a replacement for rank {}", l.rules.where(), member_who(j.info), r);
  job.unsettled.insert(g);
  settle(job);
  return true;
}

// A connection ends: its memberships update their seats (a failure makes
// the process dead; a dead process's call is answered as stale), and an id
// maker that had nothing parked stops being one.
void ServerCore::Impl::recovery_conn_ends(Job& job, const Conn& c, bool failed,
                                          const std::string& reason) {
  if (!job.resuming.empty()) resumed_conn_ends(job, c, failed, reason);
  for (const Membership& m : c.memberships) {
    auto lit = job.lineages.find(m.comm_number);
    if (lit == job.lineages.end()) continue;
    Lineage& l = lit->second;
    auto sit = l.seats.find(m.job_rank);
    if (sit == l.seats.end() || !same_process(l.rules.seat(m.job_rank), m.host, m.pid)) continue;
    Seat& s = sit->second;
    --s.open;
    const rules::SeatState now = failed ? rules::SeatState::dead : state_of(s);
    if (l.rules.set_state(m.job_rank, now, reason)) {  // it was taking part
      if (auto pit = parked.find(s.parked); s.parked != 0 && pit != parked.end()) {
        send_error(pit->second.conn, pit->second.request_id, CC_ERR_MISMATCH,
                   l.rules.stale_words(*l.rules.seat(m.job_rank)));
        finish_parked(s.parked);
        --job.joiners;
      }
      s.parked = 0;
      s.conn = 0;
      if (l.id_maker == m.job_rank) {
        l.id_maker = -1;
        l.unique_id.clear();
      }
    }
    job.unsettled.insert(m.comm_number);
  }
  for (auto& [g, l] : job.lineages) {
    if (!l.rules.pending() || l.id_maker < 0) continue;
    Seat& s = l.seats.at(l.id_maker);
    if (s.conn != c.id || s.parked != 0) continue;
    l.rules.withdraw(l.id_maker);
    s.conn = 0;
    l.id_maker = -1;
    l.unique_id.clear();
    job.unsettled.insert(g);
  }
}

// A parked recovery request whose connection is going (cancel_parked).
void ServerCore::Impl::recovery_parked_gone(uint64_t id, const Parked& p) {
  Job& job = *p.job;
  --job.joiners;
  auto lit = job.lineages.find(p.comm_number);
  if (lit == job.lineages.end()) return;
  Lineage& l = lit->second;
  if (p.replacement) {
    if (auto r = l.replacements.find(p.rank); r != l.replacements.end() && r->second.parked == id) {
      l.replacements.erase(r);
      l.rules.replacement_gone(p.rank);
    }
  } else if (auto s = l.seats.find(p.rank); s != l.seats.end() && s->second.parked == id) {
    l.rules.withdraw(p.rank);
    s->second.parked = 0;
    s->second.conn = 0;
    if (l.id_maker == p.rank) {
      l.id_maker = -1;
      l.unique_id.clear();
    }
  }
  job.unsettled.insert(p.comm_number);
}

void ServerCore::Impl::recovery_parked_expired(uint64_t id, const Parked& p) {
  Job& job = *p.job;
  const uint32_t g = p.comm_number;
  Lineage& l = job.lineages.at(g);
  if (p.replacement) {
    send_error(p.conn, p.request_id, CC_ERR_TIMEOUT,
               rules::replacement_late_words(p.rank, p.timeout_ms, l.rules.where()));
    l.replacements.erase(p.rank);
    l.rules.replacement_gone(p.rank);
    finish_parked(id);
    --job.joiners;
    maybe_idle(job);
    return;
  }
  if (!l.rules.pending()) {  // not expected: answer it rather than leave it waiting
    send_error(p.conn, p.request_id, CC_ERR_TIMEOUT,
               call_name(l.rules.kind()) + std::string(" on ") + l.rules.where() +
                   " did not complete within " + std::to_string(p.timeout_ms) + " ms");
    finish_parked(id);
    --job.joiners;
    return;
  }
  std::string id_missing;
  if (l.id_maker >= 0 && l.unique_id.empty())
    id_missing =
        l.rules.seat_who(l.id_maker) + " was asked for the new NCCL id and did not send it";
  fail_recovery(job, g, l, CC_ERR_TIMEOUT,
                l.rules.late_words(p.timeout_ms, "MASTER_ADDR, MASTER_PORT and job id", id_missing,
                                   "the rendezvous was still deciding"));
  maybe_idle(job);
}

void ServerCore::Impl::settle(Job& job) {
  while (!job.unsettled.empty()) {
    const uint32_t g = *job.unsettled.begin();
    job.unsettled.erase(job.unsettled.begin());
    auto lit = job.lineages.find(g);
    if (lit != job.lineages.end()) evaluate(job, g, lit->second);
  }
}

// Decides the next generation once the rules say it is ready, asking for
// the id first when one is needed.
void ServerCore::Impl::evaluate(Job& job, uint32_t g, Lineage& l) {
  if (!l.rules.pending()) {  // nobody calls (any more): nothing to answer
    l.id_maker = -1;
    l.unique_id.clear();
    return;
  }
  if (!l.rules.ready()) return;
  for (const auto& [info, refusal] : l.rules.take_wrong_replacements()) {
    auto rep = l.replacements.find(info.rank);
    if (rep == l.replacements.end()) continue;
    if (auto pit = parked.find(rep->second.parked); pit != parked.end()) {
      send_error(rep->second.conn, pit->second.request_id, refusal.code, refusal.words);
      finish_parked(rep->second.parked);
      --job.joiners;
    }
    l.replacements.erase(rep);
  }
  if (!l.rules.ready()) return;  // a hole again: its deadline names it
  const rules::NextGeneration next = l.rules.decide();
  if (next.method == RecoverMethod::new_id && l.unique_id.empty()) {
    if (!next.replacement_id.empty()) {
      l.unique_id = next.replacement_id;
    } else {
      if (l.id_maker >= 0) return;  // asked; its RecoverId will settle again
      for (auto& [rank, s] : l.seats) {
        if (!l.rules.taking_part(rank) || s.parked == 0) continue;
        auto pit = parked.find(s.parked);
        const uint32_t rid = pit != parked.end() ? pit->second.request_id : 0;
        finish_parked(s.parked);
        --job.joiners;
        s.parked = 0;
        l.id_maker = rank;
        log().debug("{}: asking {} for the next generation's NCCL id", l.rules.where(),
                    l.rules.seat_who(rank));
        send(s.conn, rid, RecoverIdWanted{l.rules.generation() + 1});
        return;
      }
      return;
    }
  }
  commit(job, g, l, next);
}

// Hands out the next generation: the same Joined to every member (but its
// rank), each connection now its member's membership of it.
void ServerCore::Impl::commit(Job& job, uint32_t g, Lineage& l, const rules::NextGeneration& next) {
  const uint32_t generation = l.rules.generation() + 1;
  Joined joined;
  if (next.method == RecoverMethod::new_id) joined.unique_id = l.unique_id;
  joined.generation = generation;
  joined.method = next.method;
  joined.failed = next.failed;
  // Rank 0 only, as a join's (the others come named in their events).
  const MemberInfo& first = next.members.at(0);
  joined.members.push_back({first.rank, first.host, first.pid});
  joined.world_size = static_cast<uint32_t>(next.members.size());

  std::map<int32_t, Seat> seats;
  for (size_t i = 0; i < next.members.size(); ++i) {
    const MemberInfo& m = next.members[i];
    ConnId conn = 0;
    uint64_t id = 0;
    if (next.replacement[i]) {
      const Replacement rep = l.replacements.at(m.rank);
      l.replacements.erase(m.rank);
      conn = rep.conn;
      id = rep.parked;
      seats[m.rank].open = 1;
      seats[m.rank].secret = make_nonce();  // a new process in the seat
    } else {
      const Seat& s = l.seats.at(m.rank);
      conn = s.conn;
      id = s.parked;
      seats[m.rank].open = s.open + 1;
      seats[m.rank].secret = s.secret;
    }
    joined.seat = seats[m.rank].secret;
    auto pit = parked.find(id);
    const uint32_t rid = pit != parked.end() ? pit->second.request_id : 0;
    finish_parked(id);
    --job.joiners;
    Conn& c = *conns.at(conn);
    c.memberships.push_back({g, static_cast<int32_t>(i), m.host, m.pid, 0, generation, m.rank});
    job.members.insert(c.id);
    c.last_heartbeat = current_time;
    if (heartbeat_window(c).count() > 0)
      arm(c.heartbeat_timer, current_time + heartbeat_window(c), DeadlineKind::heartbeat, c.id);
    joined.rank = static_cast<int32_t>(i);
    send(c.id, rid, joined);
  }
  l.rules.advance(next);
  l.seats = std::move(seats);
  l.id_maker = -1;
  l.unique_id.clear();
  log().info("{}: {} ranks, {} from generation {} (ranks left out or replaced: {}), by {}",
             l.rules.where(), next.members.size(),
             next.kind == RecoverKind::shrink ? "shrunk" : "regrown", generation - 1,
             joined.failed.empty() ? "none" : rank_ranges(joined.failed),
             next.method == RecoverMethod::nccl_shrink ? "ncclCommShrink" : "a new NCCL id");
}

// Every rank taking part gets the same message; the generation stays as it was.
void ServerCore::Impl::fail_recovery(Job& job, uint32_t /*comm_number*/, Lineage& l,
                                     cc_result_t code, const std::string& words) {
  log().warn("{}: the recovery failed: {}", l.rules.where(), printable(words));
  l.last_failure = words;
  l.last_failure_code = static_cast<uint32_t>(code);
  l.last_id_maker = 0;
  for (auto& [rank, s] : l.seats) {
    if (!l.rules.taking_part(rank)) continue;
    if (s.parked != 0) {
      if (auto pit = parked.find(s.parked); pit != parked.end()) {
        send_error(pit->second.conn, pit->second.request_id, code, words);
        finish_parked(s.parked);
        --job.joiners;
      }
    } else if (l.id_maker == rank) {
      l.last_id_maker = s.conn;  // its RecoverId is answered with this message
    }
    s.parked = 0;
    s.conn = 0;
  }
  l.rules.end_attempt();
  l.id_maker = -1;
  l.unique_id.clear();
}

}  // namespace cc::rv
