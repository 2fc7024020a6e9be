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
//    (`failed`), the method and the id. Its connection becomes its membership of the new generation.
//    Failures are announced only to members of the same generation.
// 8. A member that dies before that is left out (the decision waits for
//    nobody dead). One that dies after it fails the new generation as any
//    failure does: its members are told and recover again, from it.
// 9. At the first participant's deadline every participant gets the same
//    words: who did not call, which ranks never got a replacement, whether
//    the id never came. A replacement's own deadline names the regrow that
//    never came. Jobs never see each other's state.
#include <algorithm>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::Lineage;
using rules::kMaxRegrowRanks;
using server_core::member_who;
using server_core::named_list;
using server_core::nccl_text;
using server_core::quote;
using server_core::rank_ranges;
using server_core::Replacement;
using server_core::Seat;

namespace {

const auto call_name = server_core::recover_call_name;
const auto call_words = server_core::recover_call_words;
const auto where = server_core::lineage_where;

bool same_process(const Seat& s, const std::string& host, uint32_t pid) {
  return s.info.host == host && s.info.pid == pid;
}

// "rank 2 (host h, pid 7, generation 1)": its rank in the current generation.
std::string seat_who(const Lineage& l, const Seat& s) {
  return cc::who(Who{s.position, s.info.host, s.info.pid, static_cast<int>(l.generation)});
}

// Changes a seat and keeps the lineage's count of awaited seats in step.
template <class F>
void change(Lineage& l, Seat& s, F&& f) {
  const bool before = s.awaited();
  f(s);
  const bool after = s.awaited();
  if (!l.pending || before == after) return;
  if (after)
    ++l.awaited;
  else
    --l.awaited;
}

void stop_taking_part(Seat& s) {
  s.taking_part = false;
  s.parked = 0;
  s.conn = 0;
  s.can_shrink = false;
}

}  // namespace

void ServerCore::Impl::start_lineage(Job& job, uint32_t comm_number, const CommJoin& gen) {
  Lineage& l = job.lineages[comm_number];
  l = Lineage{};
  l.nccl_major_minor = gen.check.nccl_version() / 100;
  for (const auto& [rank, slot] : gen.slots) {
    Seat s;
    s.info = slot.info;
    s.open = 1;
    l.seats.emplace(rank, std::move(s));
  }
  int32_t position = 0;  // the seats in job-rank order
  for (auto& [rank, s] : l.seats) s.position = position++;
}

bool ServerCore::Impl::on_recover(Conn& c, uint32_t rid, const Recover& r, Clock::time_point now) {
  Job& job = *c.job;
  const uint32_t g = r.info.comm_number;
  const std::string me = member_who(r.info);
  const std::string call = call_name(r.kind);
  auto lit = job.lineages.find(g);
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
  if (r.generation > l.generation) {
    send_error(c.id, rid, CC_ERR_MISMATCH,
               call + " by " + me + " names generation " + std::to_string(r.generation) + " of " +
                   "communicator " + std::to_string(g) + " of job " + quote(job.id) +
                   ", but the rendezvous knows generation " + std::to_string(l.generation) +
                   " as the latest: is another server serving this job?");
    return true;
  }
  auto sit = l.seats.find(r.info.rank);
  const bool member = sit != l.seats.end() && same_process(sit->second, r.info.host, r.info.pid);
  if (!member || sit->second.dead) {
    std::string why;
    if (member)
      why = "it was declared failed (" + sit->second.dead_why + ")";
    else if (sit != l.seats.end())
      why = "its rank is held by " + seat_who(l, sit->second);
    else
      why = "it is not one of its members";
    send_error(c.id, rid, CC_ERR_MISMATCH,
               rules::stale_rank_words(r.info, where(job.id, g, l.generation), why));
    return true;
  }
  Seat& seat = sit->second;
  const std::string who = seat_who(l, seat);
  // The decision walks ranks 0..nranks-1: a size no job has is refused first.
  if (r.kind == RecoverKind::regrow && r.nranks > kMaxRegrowRanks) {
    send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
               who + " called cc_comm_regrow(nranks=" + std::to_string(r.nranks) + ") on " +
                   where(job.id, g, l.generation) + ", more than the rendezvous's limit of " +
                   std::to_string(kMaxRegrowRanks) + " ranks; pass the job's size");
    return true;
  }
  if (seat.taking_part) {
    send_error(c.id, rid, CC_ERR_INVALID_USAGE,
               who + " called " + call + " on " + where(job.id, g, l.generation) +
                   " while its earlier call is still in progress; call it once at a time");
    return true;
  }
  if (!l.pending) {
    l.pending = true;
    l.agreement.reset();
    l.id_maker = -1;
    l.unique_id.clear();
    l.awaited = 0;
    for (const auto& [rank, s] : l.seats) l.awaited += s.awaited() ? 1 : 0;
  }
  std::optional<rules::Refusal> refused =
      l.agreement.call(who, r.kind, r.nranks, where(job.id, g, l.generation));
  if (!refused && r.kind == RecoverKind::regrow)
    refused = rules::regrow_holds(who, r.info.rank, r.nranks, where(job.id, g, l.generation));
  if (refused) {
    send_error(c.id, rid, refused->code, refused->words);
    fail_recovery(job, g, l, refused->code, refused->words);
    return true;
  }
  const uint64_t id =
      park(c, Parked::of(Parked::Kind::recover, rid, job, r.timeout_ms, g, r.info.rank), now);
  ++job.joiners;
  job.ranks.insert(c.id);  // this connection holds the job's communicator state too
  change(l, seat, [&](Seat& s) {
    s.taking_part = true;
    s.parked = id;
    s.conn = c.id;
    s.can_shrink = r.can_shrink;
  });
  log().info("{}: {} called {} ({} still awaited)", where(job.id, g, l.generation), who,
             call_words(r.kind, r.nranks), l.awaited);
  job.unsettled.insert(g);
  settle(job);
  return true;
}

bool ServerCore::Impl::on_recover_id(Conn& c, uint32_t rid, const RecoverId& m,
                                     Clock::time_point now) {
  Job& job = *c.job;
  for (auto& [g, l] : job.lineages) {
    if (l.last_id_maker == c.id && !l.pending) {
      send_error(c.id, rid, static_cast<cc_result_t>(l.last_failure_code),
                 "the recovery this rank was making the NCCL id for is over: " + l.last_failure);
      return true;
    }
    if (!l.pending || l.id_maker < 0) continue;
    Seat& seat = l.seats.at(l.id_maker);
    if (seat.conn != c.id || seat.parked != 0) continue;
    if (m.unique_id.empty() || m.generation != l.generation + 1) {
      send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
                 "a recover-id for generation " + std::to_string(m.generation) + " with " +
                     std::to_string(m.unique_id.size()) + " bytes of id; " +
                     where(job.id, g, l.generation + 1) + " wants a non-empty one (a client bug)");
      return true;
    }
    l.unique_id = m.unique_id;
    seat.parked =
        park(c, Parked::of(Parked::Kind::recover, rid, job, m.timeout_ms, g, seat.info.rank), now);
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
  const std::string me = member_who(j.info);
  const std::string late = rules::late_join_words(j.info, rules::communicator_where(job.id, g));
  if (auto sit = l.seats.find(r);
      sit != l.seats.end() && !sit->second.dead && sit->second.open > 0) {
    send_error(
        c.id, rid, CC_ERR_MISMATCH,
        rules::alive_rank_words(late, r, where(job.id, g, l.generation), seat_who(l, sit->second)));
    return true;
  }
  if (auto rep = l.replacements.find(r); rep != l.replacements.end()) {
    send_error(c.id, rid, CC_ERR_MISMATCH,
               rules::replacement_waiting_words(late, r, rep->second.info));
    return true;
  }
  if (j.info.nccl_version / 100 != l.nccl_major_minor) {
    send_error(c.id, rid, CC_ERR_MISMATCH,
               me + ", a replacement for " + where(job.id, g, l.generation) + ", has NCCL " +
                   nccl_text(j.info.nccl_version) + ", but its ranks have NCCL " +
                   std::to_string(l.nccl_major_minor / 100) + "." +
                   std::to_string(l.nccl_major_minor % 100) +
                   "; install the same NCCL major.minor everywhere");
    return true;
  }
  Parked p = Parked::of(Parked::Kind::recover, rid, job, j.timeout_ms, g, r);
  p.replacement = true;
  const uint64_t id = park(c, std::move(p), now);
  ++job.joiners;
  l.replacements[r] = Replacement{c.id, id, j.info, j.unique_id};
  log().info("{}: {} waits as a replacement for rank {}", where(job.id, g, l.generation), me, r);
  job.unsettled.insert(g);
  settle(job);
  return true;
}

// A connection ends: its memberships update their seats (a failure makes
// the process dead), and an id maker that had nothing parked stops being one.
void ServerCore::Impl::recovery_conn_ends(Job& job, const Conn& c, bool failed,
                                          const std::string& reason) {
  for (const Membership& m : c.memberships) {
    auto lit = job.lineages.find(m.comm_number);
    if (lit == job.lineages.end()) continue;
    Lineage& l = lit->second;
    auto sit = l.seats.find(m.job_rank);
    if (sit == l.seats.end() || !same_process(sit->second, m.host, m.pid)) continue;
    change(l, sit->second, [&](Seat& s) {
      --s.open;
      if (failed && !s.dead) {
        s.dead = true;
        s.dead_why = reason;
      }
    });
    job.unsettled.insert(m.comm_number);
  }
  for (auto& [g, l] : job.lineages) {
    if (!l.pending || l.id_maker < 0) continue;
    Seat& s = l.seats.at(l.id_maker);
    if (s.conn != c.id || s.parked != 0) continue;
    change(l, s, stop_taking_part);
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
    if (auto r = l.replacements.find(p.rank); r != l.replacements.end() && r->second.parked == id)
      l.replacements.erase(r);
  } else if (auto s = l.seats.find(p.rank); s != l.seats.end() && s->second.parked == id) {
    change(l, s->second, stop_taking_part);
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
               rules::replacement_late_words(p.rank, p.timeout_ms, where(job.id, g, l.generation)));
    l.replacements.erase(p.rank);
    finish_parked(id);
    --job.joiners;
    maybe_idle(job);
    return;
  }
  if (!l.pending) {  // not expected: answer it rather than leave it waiting
    send_error(p.conn, p.request_id, CC_ERR_TIMEOUT,
               call_name(l.kind()) + std::string(" on ") + where(job.id, g, l.generation) +
                   " did not complete within " + std::to_string(p.timeout_ms) + " ms");
    finish_parked(id);
    --job.joiners;
    return;
  }
  std::vector<std::string> silent;
  for (const auto& [rank, s] : l.seats)
    if (s.awaited()) silent.push_back(seat_who(l, s));
  std::vector<int32_t> holes;
  if (l.kind() == RecoverKind::regrow)
    for (int32_t r = 0; r < l.nranks(); ++r) {
      auto s = l.seats.find(r);
      if ((s == l.seats.end() || !s->second.taking_part) && !l.replacements.count(r))
        holes.push_back(r);
    }
  std::string parts =
      rules::recovery_missing_words(silent, l.kind(), holes, "MASTER_ADDR, MASTER_PORT and job id");
  if (l.id_maker >= 0 && l.unique_id.empty())
    parts += std::string(parts.empty() ? "" : "; ") + seat_who(l, l.seats.at(l.id_maker)) +
             " was asked for the new NCCL id and did not send it";
  if (parts.empty()) parts = "the rendezvous was still deciding";
  fail_recovery(job, g, l, CC_ERR_TIMEOUT,
                rules::recovery_late_words(l.kind(), l.nranks(), where(job.id, g, l.generation),
                                           p.timeout_ms, parts));
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

// Decides the next generation once nobody alive is awaited (and, for a
// regrow, every hole has a replacement), asking for the id first when one
// is needed.
void ServerCore::Impl::evaluate(Job& job, uint32_t g, Lineage& l) {
  if (!l.pending || l.awaited > 0) return;
  bool anyone = false, all_can_shrink = true;
  for (const auto& [rank, s] : l.seats)
    if (s.taking_part) {
      anyone = true;
      all_can_shrink = all_can_shrink && s.can_shrink;
    }
  if (!anyone) {  // everyone who asked went away: nothing to answer
    l.pending = false;
    l.id_maker = -1;
    l.unique_id.clear();
    return;
  }
  if (l.kind() == RecoverKind::regrow) {
    for (int32_t r = 0; r < l.nranks(); ++r) {
      auto s = l.seats.find(r);
      if (s != l.seats.end() && s->second.taking_part) continue;
      auto rep = l.replacements.find(r);
      if (rep == l.replacements.end()) return;  // a hole: its deadline names it
      if (rep->second.info.world_size != l.nranks()) {
        const Replacement wrong = rep->second;
        l.replacements.erase(rep);
        auto pit = parked.find(wrong.parked);
        if (pit != parked.end()) {
          send_error(wrong.conn, pit->second.request_id, CC_ERR_MISMATCH,
                     rules::replacement_world_words(wrong.info, l.nranks(),
                                                    where(job.id, g, l.generation)));
          finish_parked(wrong.parked);
          --job.joiners;
        }
        return;
      }
    }
  }
  const RecoverMethod method = l.kind() == RecoverKind::shrink && all_can_shrink
                                   ? RecoverMethod::nccl_shrink
                                   : RecoverMethod::new_id;
  if (method == RecoverMethod::new_id && l.unique_id.empty()) {
    auto rep0 = l.replacements.find(0);
    auto seat0 = l.seats.find(0);
    const bool rank0_replaced = l.kind() == RecoverKind::regrow && rep0 != l.replacements.end() &&
                                (seat0 == l.seats.end() || !seat0->second.taking_part);
    if (rank0_replaced && !rep0->second.unique_id.empty()) {
      l.unique_id = rep0->second.unique_id;
    } else {
      if (l.id_maker >= 0) return;  // asked; its RecoverId will settle again
      for (auto& [rank, s] : l.seats) {
        if (!s.taking_part || s.parked == 0) continue;
        auto pit = parked.find(s.parked);
        const uint32_t rid = pit != parked.end() ? pit->second.request_id : 0;
        finish_parked(s.parked);
        --job.joiners;
        s.parked = 0;
        l.id_maker = rank;
        log().debug("{}: asking {} for the next generation's NCCL id",
                    where(job.id, g, l.generation), seat_who(l, s));
        send(s.conn, rid, RecoverIdWanted{l.generation + 1});
        return;
      }
      return;
    }
  }
  commit(job, g, l, method);
}

// Hands out the next generation: the same Joined to every member (but its
// rank), each connection now its member's membership of it.
void ServerCore::Impl::commit(Job& job, uint32_t g, Lineage& l, RecoverMethod method) {
  struct Member {
    int32_t job_rank;
    MemberInfo info;
    ConnId conn;
    uint64_t parked;
    int32_t open;
    bool replacement;
  };
  std::vector<Member> in;
  if (l.kind() == RecoverKind::shrink) {
    for (const auto& [rank, s] : l.seats)
      if (s.taking_part) in.push_back({rank, s.info, s.conn, s.parked, s.open + 1, false});
  } else {
    for (int32_t r = 0; r < l.nranks(); ++r) {
      auto s = l.seats.find(r);
      if (s != l.seats.end() && s->second.taking_part) {
        in.push_back(
            {r, s->second.info, s->second.conn, s->second.parked, s->second.open + 1, false});
      } else {
        const Replacement& rep = l.replacements.at(r);
        in.push_back({r, rep.info, rep.conn, rep.parked, 1, true});
      }
    }
  }
  const uint32_t next = l.generation + 1;
  Joined joined;
  if (method == RecoverMethod::new_id) joined.unique_id = l.unique_id;
  joined.generation = next;
  joined.method = method;
  int32_t position = 0;
  for (const auto& [rank, s] : l.seats) {
    if (!s.taking_part) joined.failed.push_back(position);
    ++position;
  }
  // Rank 0 only, as a join's (the others come named in their events).
  joined.members.push_back({in.at(0).job_rank, in.at(0).info.host, in.at(0).info.pid});
  joined.world_size = static_cast<uint32_t>(in.size());

  std::map<int32_t, Seat> seats;
  int32_t new_rank = 0;
  for (const Member& m : in) {  // in job-rank order: the new ranks
    Seat s;
    s.info = m.info;
    s.info.rank = m.job_rank;
    s.position = new_rank++;
    s.open = m.open;
    seats.emplace(m.job_rank, std::move(s));
    if (m.replacement) l.replacements.erase(m.job_rank);
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const Member& m = in[i];
    auto pit = parked.find(m.parked);
    const uint32_t rid = pit != parked.end() ? pit->second.request_id : 0;
    finish_parked(m.parked);
    --job.joiners;
    Conn& c = *conns.at(m.conn);
    c.memberships.push_back(
        {g, static_cast<int32_t>(i), m.info.host, m.info.pid, 0, next, m.job_rank});
    job.members.insert(c.id);
    c.last_heartbeat = current_time;
    if (heartbeat_window(c).count() > 0)
      arm(c.heartbeat_timer, current_time + heartbeat_window(c), DeadlineKind::heartbeat, c.id);
    joined.rank = static_cast<int32_t>(i);
    send(c.id, rid, joined);
  }
  l.generation = next;
  l.seats = std::move(seats);
  l.pending = false;
  l.id_maker = -1;
  l.unique_id.clear();
  l.awaited = 0;
  log().info("{}: {} ranks, {} from generation {} (ranks left out or replaced: {}), by {}",
             where(job.id, g, next), in.size(),
             l.kind() == RecoverKind::shrink ? "shrunk" : "regrown", next - 1,
             joined.failed.empty() ? "none" : rank_ranges(joined.failed),
             method == RecoverMethod::nccl_shrink ? "ncclCommShrink" : "a new NCCL id");
}

// Every rank taking part gets the same words; the generation stays as it was.
void ServerCore::Impl::fail_recovery(Job& job, uint32_t g, Lineage& l, cc_result_t code,
                                     const std::string& words) {
  log().warn("{}: the recovery failed: {}", where(job.id, g, l.generation), printable(words));
  l.last_failure = words;
  l.last_failure_code = static_cast<uint32_t>(code);
  l.last_id_maker = 0;
  for (auto& [rank, s] : l.seats) {
    if (!s.taking_part) continue;
    if (s.parked != 0) {
      if (auto pit = parked.find(s.parked); pit != parked.end()) {
        send_error(pit->second.conn, pit->second.request_id, code, words);
        finish_parked(s.parked);
        --job.joiners;
      }
    } else if (l.id_maker == rank) {
      l.last_id_maker = s.conn;  // its RecoverId is answered with these words
    }
    stop_taking_part(s);
  }
  l.pending = false;
  l.id_maker = -1;
  l.unique_id.clear();
  l.awaited = 0;
}

}  // namespace cc::rv
