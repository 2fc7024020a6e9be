// The operator's status report (StatusQuery, answered with StatusReport):
// each job, each of its communicator generations, and each member of a
// generation with its rank, host, pid, addresses, last heartbeat age, last
// completed operation and how its membership ended; the ranks a joining
// generation still misses; the bytes each job's keys hold and, for a job
// kept without a connection, the time left of its job TTL. Only an
// authenticated connection gets it (the handshake comes first), and it is
// bounded: at most kMaxStatusJobs jobs and about kStatusBudget bytes in all
// (jobs, generations, missing ranks and members). The missing lists stop
// where their share of the budget does (the count of missing ranks is
// world_size - joined); members and whole generations past the budget are
// counted as omitted members. Listing the missing ranks walks the slots in
// rank order: it costs what is listed and joined, not the world size.
// record_end keeps, in a generation's slots, how a member ended (left,
// failed, aborted) and why, so the report names a killed rank's host and pid
// after its connection is gone.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {
namespace {

using server_core::CommJoin;
using server_core::Conn;
using server_core::Job;
using server_core::Slot;

std::string cut(const std::string& s) {
  return s.size() <= kMaxStatusText ? s : s.substr(0, kMaxStatusText - 3) + "...";
}

uint32_t clamp_ms(Clock::duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return static_cast<uint32_t>(std::clamp<int64_t>(ms, 0, std::numeric_limits<uint32_t>::max()));
}

// Time to a deadline, at least 1 ms while it is armed (0 means none).
uint64_t ms_left(Clock::time_point deadline, Clock::time_point now) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<uint64_t>(std::max<int64_t>(1, ms));
}

JoinState state_of(const CommJoin& g) {
  switch (g.state) {
    case CommJoin::State::joining:
      return JoinState::joining;
    case CommJoin::State::complete:
      return JoinState::complete;
    case CommJoin::State::failed:
      break;
  }
  return JoinState::failed;
}

// Ranks a joining generation still waits for, at most this many listed.
constexpr size_t kMaxMissingListed = 4096;
// What the report's budget counts for a job's and a generation's own fields.
constexpr size_t kJobCost = 64;
constexpr size_t kGenerationCost = 64;
// The share of the budget the missing lists of every generation may take
// together, so that the generations after them still get their own lines.
constexpr size_t kMissingBudget = kStatusBudget / 4;

// The first ranks below world_size that hold no slot, at most `cap`; `joined`
// are the slots' ranks, sorted.
std::vector<int32_t> missing_ranks(const std::vector<int32_t>& joined, int32_t world_size,
                                   size_t cap) {
  std::vector<int32_t> out;
  int32_t next = 0;
  for (size_t i = 0; next < world_size && out.size() < cap; ++next) {
    while (i < joined.size() && joined[i] < next) ++i;
    if (i < joined.size() && joined[i] == next) continue;
    out.push_back(next);
  }
  return out;
}

}  // namespace

void ServerCore::Impl::record_end(Job& job, const Conn& c, MemberState how,
                                  const std::string& reason) {
  for (const Membership& m : c.memberships) {
    auto g = job.comm_joins.find(m.comm_number);
    if (g == job.comm_joins.end()) continue;
    // Slots are the communicator's join (generation 0 of a recovered one).
    if (m.generation != 0) continue;
    auto s = g->second.slots.find(m.rank);
    if (s == g->second.slots.end() || s->second.conn != c.id || s->second.ended) continue;
    s->second.ended = how;
    s->second.end_reason = cut(reason);
    s->second.peer = c.peer;
    s->second.last_completed = m.last_completed;
  }
}

bool ServerCore::Impl::on_status(Conn& c, uint32_t rid, const StatusQuery& q,
                                 Clock::time_point now) {
  ++counters.status_queries;
  StatusReport report;
  report.server = server_name;
  report.uptime_ms = static_cast<uint64_t>(std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(now - started).count()));
  report.store_bytes = total_bytes;
  report.store_bytes_limit = opt.max_total_bytes;

  // A connection of a job sees that job alone, and its members only when it
  // is one of them; a connection that names no job is the operator's.
  if (c.job != nullptr && !q.job_id.empty() && q.job_id != c.job->id) {
    send_error(c.id, rid, CC_ERR_INVALID_USAGE,
               "a status query for job " + server_core::quote(q.job_id) + " from " + c.who() +
                   ", a connection of job " + server_core::quote(c.job->id) +
                   ": a job's connection sees its own job only; an operator asks with "
                   "`cc-rendezvous status`, on a connection that names no job");
    return true;
  }
  // A connection that proved a job prefix's token sees those jobs alone.
  const auto in_scope = [&](const std::string& id) {
    return !c.status_prefix || id.starts_with(*c.status_prefix);
  };
  const bool shows_members = c.job == nullptr || !c.memberships.empty();
  std::vector<const Job*> chosen;
  if (c.job != nullptr) {
    chosen.push_back(c.job);
    report.jobs_total = 1;
  } else if (!q.job_id.empty()) {
    if (auto it = jobs.find(q.job_id); it != jobs.end() && in_scope(q.job_id))
      chosen.push_back(it->second.get());
    report.jobs_total = static_cast<uint32_t>(chosen.size());
  } else if (c.status_prefix) {
    for (const auto& [id, job] : jobs)
      if (in_scope(id)) chosen.push_back(job.get());
    report.jobs_total = static_cast<uint32_t>(chosen.size());
  } else {
    chosen.reserve(jobs.size());
    for (const auto& [id, job] : jobs) chosen.push_back(job.get());
    report.jobs_total = static_cast<uint32_t>(jobs.size());
  }
  std::sort(chosen.begin(), chosen.end(), [](const Job* a, const Job* b) { return a->id < b->id; });
  if (chosen.size() > kMaxStatusJobs) chosen.resize(kMaxStatusJobs);

  size_t used = 0;
  size_t missing_used = 0;
  for (const Job* job : chosen) {
    JobStatus js;
    js.id = job->id;
    js.connections = static_cast<uint32_t>(job->conns.size());
    js.keys = static_cast<uint32_t>(job->keys.size());
    js.bytes = job->bytes;
    if (job->ttl_timer) js.expires_in_ms = ms_left((*job->ttl_timer)->first, now);
    used += kJobCost + job->id.size();
    for (const auto& [number, gen] : job->comm_joins) {
      CommStatus gs;
      gs.comm_number = number;
      gs.state = state_of(gen);
      gs.world_size = gen.world_size;
      gs.joined = gen.joined;
      gs.failure = cut(gen.failure);
      const size_t own = kGenerationCost + gs.failure.size();
      if (used + own > kStatusBudget) {
        report.members_omitted += static_cast<uint32_t>(gen.slots.size());
        continue;
      }
      used += own;

      std::vector<const std::pair<const int32_t, Slot>*> slots;
      slots.reserve(gen.slots.size());
      for (const auto& entry : gen.slots) slots.push_back(&entry);
      std::sort(slots.begin(), slots.end(), [](auto* a, auto* b) { return a->first < b->first; });
      if (gen.state == CommJoin::State::joining) {
        std::vector<int32_t> joined;
        joined.reserve(slots.size());
        for (const auto* entry : slots) joined.push_back(entry->first);
        gs.missing =
            missing_ranks(joined, gen.world_size,
                          std::min(kMaxMissingListed, (kMissingBudget - missing_used) / 4));
        missing_used += 4 * gs.missing.size();
        used += 4 * gs.missing.size();
      }
      if (!shows_members) report.members_omitted += static_cast<uint32_t>(slots.size());
      for (const auto* entry : shows_members ? slots : decltype(slots){}) {
        const Slot& slot = entry->second;
        MemberStatus ms;
        ms.rank = entry->first;
        ms.host = slot.info.host;
        ms.pid = slot.info.pid;
        ms.nccl_addr = slot.info.nccl_addr;
        ms.peer = slot.peer;
        ms.last_completed = slot.last_completed;
        ms.reason = slot.end_reason;
        const auto live = slot.conn != 0 ? conns.find(slot.conn) : conns.end();
        if (live != conns.end()) {
          const Conn& member = *live->second;
          ms.peer = member.peer;
          ms.heartbeat_window_ms = clamp_ms(heartbeat_window(member));
          for (const Membership& m : member.memberships)
            if (m.comm_number == number && m.generation == 0 && m.rank == ms.rank) {
              ms.last_completed = m.last_completed;
              ms.heartbeat_age_ms = clamp_ms(now - member.last_heartbeat);
            }
        }
        if (slot.ended)
          ms.state = *slot.ended;
        else if (gen.state == CommJoin::State::joining && slot.parked != 0)
          ms.state = MemberState::joining;
        else if (live != conns.end())
          ms.state = MemberState::member;
        else
          ms.state = MemberState::left;
        const size_t size =
            48 + ms.host.size() + ms.peer.size() + ms.nccl_addr.size() + ms.reason.size();
        if (used + size > kStatusBudget) {
          ++report.members_omitted;
          continue;
        }
        used += size;
        gs.members.push_back(std::move(ms));
      }
      js.comms.push_back(std::move(gs));
    }
    report.jobs.push_back(std::move(js));
  }
  send(c.id, rid, report);
  return true;
}

}  // namespace cc::rv
