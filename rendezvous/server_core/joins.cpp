// Communicator joins. Every rank of a generation of a job sends Join with
// what it knows of itself; the join is parked until all world_size ranks are
// in. Each new joiner is checked by the join rules (rendezvous/rules/
// join_rules.hpp, which the etcd backend follows too): the same world size
// as the first, a rank in range and not claimed twice, the same NCCL
// major.minor, and no GPU shared with another rank of its host. One failed
// check fails the whole generation, and every pending joiner gets the same
// message. When the last rank joins, each gets Joined (rank 0's unique id,
// rank 0's host and pid, and any NAT notice) and becomes a member of the
// job; when the join deadline passes first, the message names the ranks that
// never joined. A Join of a generation that completed goes to recovery.cpp
// (a replacement for a failed rank, or a stale one). Leave ends a
// membership without announcing anything. A connection that sent Join
// counts as one of the job's ranks until it leaves or goes; the last of
// them takes the job's communicator state with it (retention.cpp).
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "rendezvous/rules/join_rules.hpp"
#include "rendezvous/rules/words.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::member_who;
using server_core::nat_notice;
using server_core::quote;

namespace {

// NAT notices Joined carries, one a rank; the others are counted.
constexpr size_t kMaxNoticeLines = 8;

}  // namespace

bool ServerCore::Impl::on_join(Conn& c, uint32_t rid, const Join& j, Clock::time_point now) {
  Job& job = *c.job;
  const MemberInfo& in = j.info;
  const std::string where = rules::communicator_where(job.id, in.comm_number);
  const std::string me = member_who(in);
  if (holds_join(job, in.comm_number)) {
    hold_join(c, rid, j);  // resume.cpp: a replacement's, or one sent again, before the resumes
    return true;
  }
  job.ranks.insert(c.id);
  ++counters.joins;
  // A world the server could never hold is refused at once: each rank takes
  // one of max_connections, on a connection of its own or behind a node agent.
  if (static_cast<size_t>(in.world_size) > opt.max_connections) {
    send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
               me + " of " + where + " asks for a world of " + std::to_string(in.world_size) +
                   " ranks, more than the server can hold: its limit is " +
                   std::to_string(opt.max_connections) +
                   " connections (a rank behind cc-run's node agent counts as one); check "
                   "WORLD_SIZE, or raise the server's --max-connections");
    return true;
  }
  if (auto r = job.resuming.find(in.comm_number); r != job.resuming.end() && r->second.known)
    return resume_join(c, rid, j, now);  // resume.cpp: it completed on the server before
  auto [git, fresh] = job.comm_joins.try_emplace(in.comm_number);
  CommJoin& gen = git->second;
  if (!fresh && gen.state == CommJoin::State::complete && job.lineages.count(in.comm_number))
    return on_replacement(c, rid, j, now);  // recovery.cpp: a replacement, or a stale one
  if (!fresh && gen.state == CommJoin::State::complete) {
    send_error(c.id, rid, CC_ERR_MISMATCH,
               rules::late_join_words(in, where) +
                   "; a rank restarted late or two communicators got one number: restart the "
                   "whole job");
    return true;
  }
  if (!fresh && gen.state == CommJoin::State::failed) {
    send_error(c.id, rid, CC_ERR_MISMATCH, rules::already_failed_words(where, gen.failure));
    return true;
  }
  if (fresh) gen.world_size = in.world_size;
  // The joiner is parked first so a failure below reaches it with the others.
  const uint64_t id =
      park(c, Parked::of(Parked::Kind::join, rid, job, j.timeout_ms, in.comm_number, in.rank), now);
  ++job.joiners;
  if (auto refused = gen.check.arrive(in, where, j.unique_id)) {
    fail_join(job, in.comm_number, gen, refused->code, refused->words, id);
    return true;
  }
  Slot& slot = gen.slots[in.rank];
  slot.conn = c.id;
  slot.parked = id;
  slot.info = in;
  if (std::string note = nat_notice(in, c.peer); !note.empty()) {
    log().warn("{}: {}", where, printable(note));
    if (gen.notice_lines < kMaxNoticeLines) gen.notice += (gen.notice.empty() ? "" : "\n") + note;
    ++gen.notice_lines;
  }
  ++gen.joined;
  log().debug("{}: {} joined ({} of {})", where, me, gen.joined, gen.world_size);
  if (gen.joined == gen.world_size) complete(job, in.comm_number, gen, now);
  return true;
}

// Every rank joined: each pending join is answered with Joined, and its
// connection becomes a member, watched by heartbeat when it has a window.
// Joined names rank 0 only, the one member a rank names without an event
// (rank 0's embedded server going away); every event names its own rank,
// host and pid. A list of every member in each Joined would cost O(W^2)
// bytes for a join of W ranks.
void ServerCore::Impl::complete(Job& job, uint32_t comm_number, CommJoin& gen,
                                Clock::time_point now) {
  gen.state = CommJoin::State::complete;
  ++counters.generations_completed;
  Joined joined;
  joined.unique_id = gen.check.unique_ids();
  joined.notice = gen.notice;
  if (gen.notice_lines > kMaxNoticeLines)
    joined.notice += "\nand " + std::to_string(gen.notice_lines - kMaxNoticeLines) +
                     " more ranks of this generation the same (the server's log names them)";
  const MemberInfo& first = gen.slots.at(0).info;
  joined.members.push_back({first.rank, first.host, first.pid});
  joined.world_size = static_cast<uint32_t>(gen.world_size);
  start_lineage(job, comm_number, gen);
  server_core::Lineage& lineage = job.lineages.at(comm_number);
  for (auto& [rank, s] : gen.slots) {
    auto pit = parked.find(s.parked);
    const uint32_t rid = pit != parked.end() ? pit->second.request_id : 0;
    finish_parked(s.parked);
    --job.joiners;
    s.parked = 0;
    Conn& c = *conns.at(s.conn);
    c.memberships.push_back({comm_number, s.info.rank, s.info.host, s.info.pid, 0, 0, s.info.rank});
    job.members.insert(c.id);
    c.last_heartbeat = now;
    if (heartbeat_window(c).count() > 0)
      arm(c.heartbeat_timer, now + heartbeat_window(c), DeadlineKind::heartbeat, c.id);
    joined.seat = lineage.seats.at(rank).secret;
    send(c.id, rid, joined);
  }
  gen.check.clear();
  log().info("communicator {} of job {}: all {} ranks joined", comm_number, quote(job.id),
             gen.world_size);
}

// Answers every pending join of the generation with `words`; later joins of
// it are refused with the same message. The pending joins are its slots' and
// `joiner`, the join being checked (parked, not yet in a slot): what the
// generation holds, not every request parked on the server.
void ServerCore::Impl::fail_join(Job& job, uint32_t comm_number, CommJoin& gen, cc_result_t code,
                                 const std::string& words, uint64_t joiner) {
  gen.state = CommJoin::State::failed;
  gen.failure = words;
  ++counters.generations_failed;
  log().warn("communicator {} of job {} failed: {}", comm_number, quote(job.id), printable(words));
  std::vector<uint64_t> ids;
  ids.reserve(gen.slots.size() + 1);
  for (const auto& [rank, s] : gen.slots)
    if (s.parked != 0) ids.push_back(s.parked);
  if (joiner != 0) ids.push_back(joiner);
  for (uint64_t id : ids) {
    auto it = parked.find(id);
    if (it == parked.end() || it->second.kind != Parked::Kind::join) continue;
    send_error(it->second.conn, it->second.request_id, code, words);
    finish_parked(id);
    --job.joiners;
  }
  gen.slots.clear();
  gen.check.clear();
  maybe_idle(job);
}

void ServerCore::Impl::join_timeout(Job& job, const Parked& p) {
  CommJoin& gen = job.comm_joins[p.comm_number];
  const std::string words =
      rules::never_joined_words(gen.check.missing(), gen.world_size, gen.joined,
                                rules::communicator_where(job.id, p.comm_number), p.timeout_ms,
                                {"MASTER_ADDR, MASTER_PORT and job id", "the server"});
  fail_join(job, p.comm_number, gen, CC_ERR_TIMEOUT, words);
}

bool ServerCore::Impl::on_leave(Conn& c, uint32_t rid) {
  Job& job = *c.job;
  if (!c.memberships.empty()) {
    log().debug("job {}: {} left", quote(job.id), c.who());
    ++counters.leaves;
    recovery_conn_ends(job, c, false, "");
    end_memberships(job, c);
    settle(job);
    maybe_idle(job);
  }
  send(c.id, rid, Ok{});
  bool joining = false;
  for (uint64_t id : c.parked) {
    auto it = parked.find(id);
    joining = joining || (it != parked.end() && (it->second.kind == Parked::Kind::join ||
                                                 it->second.kind == Parked::Kind::recover));
  }
  if (!joining) rank_gone(job, c.id);
  return true;
}

// The connection is no member of any generation any more; its slots stay,
// without a connection, keeping its address and last completed operation for
// the status report (and "left" unless a failure or abort was recorded).
void ServerCore::Impl::end_memberships(Job& job, Conn& c) {
  for (const Membership& m : c.memberships) {
    auto g = job.comm_joins.find(m.comm_number);
    if (g == job.comm_joins.end()) continue;
    auto s = g->second.slots.find(m.rank);
    if (s == g->second.slots.end()) continue;
    s->second.conn = 0;
    s->second.peer = c.peer;
    s->second.last_completed = m.last_completed;
    if (!s->second.ended) s->second.ended = MemberState::left;
  }
  const std::vector<Membership> ended = std::move(c.memberships);
  c.memberships.clear();
  job.members.erase(c.id);
  disarm(c.heartbeat_timer);
  for (const Membership& m : ended) calls_member_gone(job, {m.comm_number, m.generation}, m.rank);
}

}  // namespace cc::rv
