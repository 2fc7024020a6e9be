// Communicator joins. Every rank of a generation of a job sends Join with
// what it knows of itself; the join is parked until all world_size ranks are
// in. Each new joiner is checked against the first: the same world size, a
// rank in range and not claimed twice, the same NCCL major.minor, and no GPU
// shared with another rank of its host. One failed check fails the whole
// generation, and every pending joiner gets the same words. When the last
// rank joins, each gets Joined (rank 0's unique id, the member list and any
// NAT notice) and becomes a member of the job; when the join deadline
// passes first, the words name the ranks that never joined. A Join of a
// generation that completed goes to recovery.cpp (a replacement for a failed
// rank, or a stale one). Leave ends a membership without announcing anything.
// A connection that sent Join counts
// as one of the job's ranks until it leaves or goes; the last of them takes
// the job's communicator state with it (retention.cpp).
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/who.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::member_who;
using server_core::nat_notice;
using server_core::nccl_text;
using server_core::quote;
using server_core::rank_ranges;

bool ServerCore::Impl::on_join(Conn& c, uint32_t rid, const Join& j, Clock::time_point now) {
  Job& job = *c.job;
  const MemberInfo& in = j.info;
  const std::string where =
      "job " + quote(job.id) + " (generation " + std::to_string(in.generation) + ")";
  const std::string me = member_who(in);
  job.ranks.insert(c.id);
  ++counters.joins;
  if (static_cast<size_t>(in.world_size) > opt.max_connections) {
    send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
               me + " of " + where + " asks for a world of " + std::to_string(in.world_size) +
                   " ranks, more than the server's limit of " +
                   std::to_string(opt.max_connections) + " connections; check WORLD_SIZE");
    return true;
  }
  auto [git, fresh] = job.generations.try_emplace(in.generation);
  Generation& gen = git->second;
  if (!fresh && gen.state == Generation::State::complete && job.lineages.count(in.generation))
    return on_replacement(c, rid, j, now);  // recovery.cpp: a replacement, or a stale one
  if (!fresh && gen.state == Generation::State::complete) {
    send_error(c.id, rid, CC_ERR_MISMATCH,
               me + " joined " + where +
                   " after it had completed; a rank restarted late or two communicators use one "
                   "generation: restart the whole job");
    return true;
  }
  if (!fresh && gen.state == Generation::State::failed) {
    send_error(c.id, rid, CC_ERR_MISMATCH, where + " already failed: " + gen.failure);
    return true;
  }
  if (fresh) {
    gen.world_size = in.world_size;
    gen.first = me;
    gen.nccl_major_minor = in.nccl_version / 100;
    gen.nccl_version = in.nccl_version;
    gen.nccl_rank = in.rank;
  }
  // The joiner is parked first so a failure below reaches it with the others.
  const uint64_t id =
      park(c, Parked::of(Parked::Kind::join, rid, job, j.timeout_ms, in.generation, in.rank), now);
  ++job.joiners;

  if (in.world_size != gen.world_size) {
    fail_generation(job, in.generation, gen, CC_ERR_MISMATCH,
                    "ranks disagree on the world size of " + where + ": " + gen.first + " said " +
                        std::to_string(gen.world_size) + ", " + me + " said " +
                        std::to_string(in.world_size) + "; give every rank the same WORLD_SIZE");
    return true;
  }
  if (in.rank < 0 || in.rank >= gen.world_size) {
    fail_generation(job, in.generation, gen, CC_ERR_INVALID_ARGUMENT,
                    me + " is out of range for " + where + " of " + std::to_string(gen.world_size) +
                        " ranks (valid: 0-" + std::to_string(gen.world_size - 1) +
                        "); check RANK and WORLD_SIZE");
    return true;
  }
  if (auto taken = gen.slots.find(in.rank); taken != gen.slots.end()) {
    const Slot& slot = taken->second;
    fail_generation(job, in.generation, gen, CC_ERR_MISMATCH,
                    "rank " + std::to_string(in.rank) + " of " + where + " was claimed twice: by " +
                        member_who(slot.info) + " and by " + me +
                        "; give every process its own RANK");
    return true;
  }
  if (in.nccl_version / 100 != gen.nccl_major_minor) {
    auto r = gen.slots.find(gen.nccl_rank);
    const MemberInfo ref = r != gen.slots.end() ? r->second.info : MemberInfo{};
    fail_generation(
        job, in.generation, gen, CC_ERR_MISMATCH,
        "ranks of " + where +
            " load different NCCL versions: " + cc::who(gen.nccl_rank, ref.host, ref.pid) +
            " has " + nccl_text(gen.nccl_version) + ", " + me + " has " +
            nccl_text(in.nccl_version) + "; install the same NCCL major.minor everywhere");
    return true;
  }
  if (!in.gpu_uuid.empty()) {
    auto [owner, added] = gen.gpu_owner.try_emplace(gpu_owner_key(in), in.rank);
    if (!added) {
      const MemberInfo& other = gen.slots.at(owner->second).info;
      fail_generation(job, in.generation, gen, CC_ERR_MISMATCH,
                      member_who(other) + " and " + me + " of " + where + " use the same GPU " +
                          in.gpu_uuid +
                          "; give each local rank its own device (LOCAL_RANK, CC_DEVICE)");
      return true;
    }
  }
  Slot& slot = gen.slots[in.rank];
  slot.conn = c.id;
  slot.parked = id;
  slot.info = in;
  if (in.rank == 0) gen.unique_id = j.unique_id;
  if (std::string note = nat_notice(in, c.peer); !note.empty()) {
    log().warn("{}: {}", where, note);
    gen.notice += (gen.notice.empty() ? "" : "\n") + note;
  }
  ++gen.joined;
  log().debug("{}: {} joined ({} of {})", where, me, gen.joined, gen.world_size);
  if (gen.joined == gen.world_size) complete(job, in.generation, gen, now);
  return true;
}

// Every rank joined: each pending join is answered with Joined, and its
// connection becomes a member, watched by heartbeat when it has a window.
void ServerCore::Impl::complete(Job& job, uint32_t generation, Generation& gen,
                                Clock::time_point now) {
  gen.state = Generation::State::complete;
  ++counters.generations_completed;
  Joined joined;
  joined.unique_id = gen.unique_id;
  joined.notice = gen.notice;
  joined.members.reserve(gen.slots.size());
  for (int32_t r = 0; r < gen.world_size; ++r) {
    const MemberInfo& i = gen.slots.at(r).info;
    joined.members.push_back({i.rank, i.host, i.pid});
  }
  for (auto& [rank, s] : gen.slots) {
    auto pit = parked.find(s.parked);
    const uint32_t rid = pit != parked.end() ? pit->second.request_id : 0;
    finish_parked(s.parked);
    --job.joiners;
    s.parked = 0;
    Conn& c = *conns.at(s.conn);
    c.memberships.push_back({generation, s.info.rank, s.info.host, s.info.pid, 0, 0, s.info.rank});
    job.members.insert(c.id);
    c.last_heartbeat = now;
    if (heartbeat_window(c).count() > 0)
      arm(c.heartbeat_timer, now + heartbeat_window(c), DeadlineKind::heartbeat, c.id);
    send(c.id, rid, joined);
  }
  gen.gpu_owner.clear();
  start_lineage(job, generation, gen);
  log().info("job {} (generation {}): all {} ranks joined", quote(job.id), generation,
             gen.world_size);
}

// Answers every pending join of the generation with `words`; later joins of
// it are refused with the same words.
void ServerCore::Impl::fail_generation(Job& job, uint32_t generation, Generation& gen,
                                       cc_result_t code, const std::string& words) {
  gen.state = Generation::State::failed;
  gen.failure = words;
  ++counters.generations_failed;
  log().warn("job {} (generation {}) failed: {}", quote(job.id), generation, words);
  std::vector<uint64_t> ids;
  for (const auto& [id, p] : parked)
    if (p.kind == Parked::Kind::join && p.job == &job && p.generation == generation)
      ids.push_back(id);
  for (uint64_t id : ids) {
    send_error(parked.at(id).conn, parked.at(id).request_id, code, words);
    finish_parked(id);
    --job.joiners;
  }
  gen.slots.clear();
  gen.gpu_owner.clear();
  maybe_idle(job);
}

void ServerCore::Impl::join_timeout(Job& job, const Parked& p) {
  Generation& gen = job.generations[p.generation];
  std::vector<int32_t> missing;
  for (int32_t r = 0; r < gen.world_size; ++r)
    if (!gen.slots.count(r)) missing.push_back(r);
  const std::string words =
      std::string(missing.size() == 1 ? "rank " : "ranks ") + rank_ranges(missing) + " of " +
      std::to_string(gen.world_size) + " never joined job " + quote(job.id) + " (generation " +
      std::to_string(p.generation) + ") within " + std::to_string(p.timeout_ms) + " ms (" +
      std::to_string(gen.joined) + " joined); check that " + (missing.size() == 1 ? "it" : "they") +
      " started, use the same MASTER_ADDR, MASTER_PORT and job id, and can reach the server";
  fail_generation(job, p.generation, gen, CC_ERR_TIMEOUT, words);
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
    auto g = job.generations.find(m.generation);
    if (g == job.generations.end()) continue;
    auto s = g->second.slots.find(m.rank);
    if (s == g->second.slots.end()) continue;
    s->second.conn = 0;
    s->second.peer = c.peer;
    s->second.last_completed = m.last_completed;
    if (!s->second.ended) s->second.ended = MemberState::left;
  }
  c.memberships.clear();
  job.members.erase(c.id);
  disarm(c.heartbeat_timer);
}

}  // namespace cc::rv
