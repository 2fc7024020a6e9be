// Requests the rendezvous server answers later: a Get of a key not yet set,
// a Wait for keys not yet set, and a Join until its generation is complete.
// park gives each an id and, when it asked for one, a deadline; wake answers
// the Gets and Waits a newly set key completes (a Wait only once all its keys
// exist at the same time: one deleted meanwhile is waited for again); expire_parked answers one
// whose deadline passed with Error(CC_ERR_TIMEOUT) naming what never came
// (for a join: the ranks that never joined, joins.cpp; for a step of the
// reachability test: preflight.cpp). A connection that goes cancels its
// parked requests, and a pending join gives up its slot. Recovery requests
// (Recover, RecoverId, a replacement's Join) are handed to recovery.cpp at
// both ends.
//
// Every request holds handles on the lists it is in (its connection's, and
// for a Get or Wait its keys' waiter lists), so taking it out costs O(1)
// whatever those lists hold. Gets and Waits are counted against the limits
// per connection, per job and in all (ServerOptions::max_parked_bytes_*).
// No call answers or takes out more than a turn's budget of them
// (kAnswersPerTurn): a Set's other waiters are a PendingWake, answered in
// the next turns with the value the Set left; a closed connection's others
// are orphans, taken out in the next turns and answered by no one.
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/log.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::key_list;
using server_core::quote;

namespace {

const std::string& waited_key(const server_core::Parked& p, size_t slot) {
  return p.kind == server_core::Parked::Kind::get ? p.key : p.keys[slot];
}

bool for_keys(const server_core::Parked& p) {
  return p.kind == server_core::Parked::Kind::get || p.kind == server_core::Parked::Kind::wait;
}

}  // namespace

uint64_t ServerCore::Impl::park(Conn& c, Parked p, Clock::time_point now) {
  const uint64_t id = next_parked++;
  p.conn = c.id;
  auto& slot = parked.emplace(id, std::move(p)).first->second;
  if (slot.timeout_ms > 0)
    arm(slot.timer, now + std::chrono::milliseconds(slot.timeout_ms), DeadlineKind::parked, id);
  auto& list = for_keys(slot) ? c.waiting : c.parked;
  slot.conn_at = list.insert(list.end(), id);
  return id;
}

// True when a Get or Wait that costs `cost` may park within the limits; else
// answers it with a message naming the limit passed. `what` names the request.
bool ServerCore::Impl::parked_room(Conn& c, uint32_t rid, size_t cost, const std::string& what) {
  Job& job = *c.job;
  std::string held;
  std::string flag;
  size_t limit = 0;
  if (c.parked_bytes + cost > opt.max_parked_bytes_per_connection) {
    held =
        "this connection's parked gets and waits hold " + std::to_string(c.parked_bytes) + " bytes";
    limit = opt.max_parked_bytes_per_connection;
    flag = "--max-parked-bytes-per-connection";
  } else if (job.parked_bytes + cost > opt.max_parked_bytes_per_job) {
    held = "the parked gets and waits of job " + quote(job.id) + " hold " +
           std::to_string(job.parked_bytes) + " bytes";
    limit = opt.max_parked_bytes_per_job;
    flag = "--max-parked-bytes-per-job";
  } else if (parked_bytes + cost > opt.max_parked_bytes_total) {
    held = "the parked gets and waits of every job hold " + std::to_string(parked_bytes) + " bytes";
    limit = opt.max_parked_bytes_total;
    flag = "--max-parked-bytes";
  } else {
    return true;
  }
  counters.limit(LimitKind::max_parked);
  std::string words = what + " was refused: " + held + ", and this one (" + std::to_string(cost) +
                      " bytes) would pass the server's limit of " + std::to_string(limit) +
                      " bytes; wait for fewer keys at once, or raise the limit "
                      "(cc-rendezvous " +
                      flag + ")";
  if (!c.refused_parking)
    log().warn("{}: {} (later refusals on this connection are counted, not logged)", c.who(),
               words);
  c.refused_parking = true;
  send_error(c.id, rid, CC_ERR_RENDEZVOUS, std::move(words));
  return false;
}

// Parks a Get (on p.key) or a Wait (on p.keys, each key once) whose room was
// checked, and lists it on each of its keys that is not set.
uint64_t ServerCore::Impl::park_on_keys(Conn& c, Parked p, Clock::time_point now) {
  Job& job = *c.job;
  if (p.kind == Parked::Kind::wait) {
    std::unordered_set<std::string> seen;
    std::vector<std::string> distinct;
    distinct.reserve(p.keys.size());
    for (auto& k : p.keys)
      if (seen.insert(k).second) distinct.push_back(std::move(k));
    p.keys = std::move(distinct);
    p.listed.resize(p.keys.size());
  } else {
    p.listed.resize(1);
  }
  const size_t cost = p.cost;
  const uint64_t id = park(c, std::move(p), now);
  Parked& q = parked.at(id);
  c.parked_bytes += cost;
  job.parked_bytes += cost;
  parked_bytes += cost;
  q.missing = 0;
  for (uint32_t i = 0; i < q.listed.size(); ++i) {
    if (job.keys.count(waited_key(q, i))) continue;
    list_waiter(job, id, q, i);
    ++q.missing;
  }
  return id;
}

void ServerCore::Impl::list_waiter(Job& job, uint64_t id, Parked& p, uint32_t slot) {
  auto& list = job.waiters[waited_key(p, slot)];
  p.listed[slot].at = list.insert(list.end(), Waiter{id, next_listing++, slot});
  p.listed[slot].active = true;
}

// Takes a Get or Wait off the waiter lists of its job's keys (a job's keys
// may outlive many requests that timed out or whose connection went).
void ServerCore::Impl::unlist_waiter(Parked& p) {
  for (size_t i = 0; i < p.listed.size(); ++i) {
    if (!p.listed[i].active) continue;
    p.listed[i].active = false;
    auto w = p.job->waiters.find(waited_key(p, i));
    if (w == p.job->waiters.end()) continue;
    w->second.erase(p.listed[i].at);
    if (w->second.empty()) p.job->waiters.erase(w);
  }
}

// Removes a parked request from every list it is in, and its cost.
void ServerCore::Impl::unpark(std::unordered_map<uint64_t, Parked>::iterator it) {
  Parked& p = it->second;
  unlist_waiter(p);
  disarm(p.timer);
  p.job->parked_bytes -= p.cost;
  parked_bytes -= p.cost;
  auto cit = conns.find(p.conn);
  if (cit == conns.end()) {
    orphans.erase(p.conn_at);
  } else {
    cit->second->parked_bytes -= p.cost;
    (for_keys(p) ? cit->second->waiting : cit->second->parked).erase(p.conn_at);
  }
  parked.erase(it);
}

// Finishes a parked request without answering it.
void ServerCore::Impl::finish_parked(uint64_t id) {
  auto it = parked.find(id);
  if (it != parked.end()) unpark(it);
}

// The connection is going: a pending join gives up its slot, a pending step
// of the reachability test is no longer waited for.
void ServerCore::Impl::cancel_parked(uint64_t id) {
  auto it = parked.find(id);
  if (it == parked.end()) return;
  Parked& p = it->second;
  if (p.kind == Parked::Kind::join) release_join_slot(p);
  if (p.kind == Parked::Kind::recover) recovery_parked_gone(id, p);
  if (p.kind == Parked::Kind::preflight) {
    auto g = p.job->comm_joins.find(p.comm_number);
    if (g != p.job->comm_joins.end()) {
      auto& members = g->second.preflight.members;
      if (p.rank >= 0 && static_cast<size_t>(p.rank) < members.size() &&
          members[static_cast<size_t>(p.rank)].parked == id)
        members[static_cast<size_t>(p.rank)].parked = 0;
    }
  }
  unpark(it);
}

// The connection is going: its requests are cancelled; of its Gets and
// Waits a turn's budget at once, the rest (orphans) in the next turns
// (reap_orphans), answered by no one meanwhile.
void ServerCore::Impl::cancel_all_parked(Conn& c) {
  for (uint64_t id : std::vector<uint64_t>(c.parked.begin(), c.parked.end())) cancel_parked(id);
  while (!c.waiting.empty() && turn_budget > 0) {
    --turn_budget;
    finish_parked(c.waiting.front());
  }
  if (c.waiting.empty()) return;
  orphans.splice(orphans.end(), c.waiting);
  if (!reap_timer) arm(reap_timer, current_time, DeadlineKind::reap, 0);
}

void ServerCore::Impl::reap_orphans() {
  reap_timer.reset();  // already erased by expire()
  while (!orphans.empty() && turn_budget > 0) {
    --turn_budget;
    auto it = parked.find(orphans.front());
    if (it == parked.end()) {
      orphans.pop_front();
      continue;
    }
    Job& job = *it->second.job;
    unpark(it);
    orphan_gone(job);
  }
  if (!orphans.empty()) arm(reap_timer, current_time, DeadlineKind::reap, 0);
}

// A job whose last connection went waits for its orphans before what it
// keeps is decided (retention.cpp); the last orphan taken out decides it.
void ServerCore::Impl::orphan_gone(Job& job) {
  if (job.conns.empty() && job.parked_bytes == 0) job_unused(job);
}

void ServerCore::Impl::release_join_slot(const Parked& p) {
  Job& job = *p.job;
  auto g = job.comm_joins.find(p.comm_number);
  if (g == job.comm_joins.end()) return;
  CommJoin& gen = g->second;
  auto s = gen.slots.find(p.rank);
  if (gen.state == CommJoin::State::joining && s != gen.slots.end() && s->second.conn == p.conn) {
    gen.check.leave(p.rank);
    gen.slots.erase(s);
    --gen.joined;
  }
  --job.joiners;
  maybe_idle(job);
}

void ServerCore::Impl::expire_parked(uint64_t id) {
  auto it = parked.find(id);
  if (it == parked.end()) return;
  Parked& p = it->second;
  p.timer.reset();  // already erased by expire()
  Job& job = *p.job;
  const bool answered = conns.count(p.conn) != 0;  // an orphan is answered by no one
  if (p.kind == Parked::Kind::get) {
    if (answered)
      send_error(p.conn, p.request_id, CC_ERR_TIMEOUT,
                 "key " + quote(p.key) + " of job " + quote(job.id) + " was not set within " +
                     std::to_string(p.timeout_ms) +
                     " ms; check that the rank that sets it is running and uses the same job id "
                     "and rendezvous server");
    finish_parked(id);
    orphan_gone(job);
  } else if (p.kind == Parked::Kind::wait) {
    std::vector<std::string> missing;
    for (const auto& k : p.keys)
      if (!job.keys.count(k)) missing.push_back(k);
    if (answered)
      send_error(p.conn, p.request_id, CC_ERR_TIMEOUT,
                 "wait on job " + quote(job.id) + " timed out after " +
                     std::to_string(p.timeout_ms) + " ms; still missing: " + key_list(missing) +
                     "; check that the ranks that set them are running and use the same job id");
    finish_parked(id);
    orphan_gone(job);
  } else if (p.kind == Parked::Kind::recover) {
    recovery_parked_expired(id, p);
  } else if (p.kind == Parked::Kind::preflight) {
    preflight_expired(p);
  } else {
    join_timeout(job, p);
  }
}

// The key was just set: answers the Gets parked on it, and the Waits for
// which it was the last missing key, as far as this turn's budget goes; the
// rest are answered in the next turns (continue_wake).
void ServerCore::Impl::wake(Job& job, const std::string& key) {
  auto w = job.waiters.find(key);
  if (w == job.waiters.end()) return;
  const uint64_t before = next_listing;
  if (wake_listed(job, key, before, job.keys[key])) return;
  const uint64_t id = next_wake++;
  auto& pending = wakes[id];
  pending.job = job.serial;
  pending.key = key;
  pending.before = before;
  pending.value = std::make_shared<const std::vector<uint8_t>>(job.keys[key]);
  arm(pending.timer, current_time, DeadlineKind::wake, id);
}

// Answers the requests listed on `key` before listing number `before`, in
// their order, while the turn's budget lasts; true when none is left.
bool ServerCore::Impl::wake_listed(Job& job, const std::string& key, uint64_t before,
                                   const std::vector<uint8_t>& value) {
  for (;;) {
    auto w = job.waiters.find(key);
    if (w == job.waiters.end() || w->second.front().seq >= before) return true;
    if (turn_budget == 0 || turn_spent()) return false;
    --turn_budget;
    const Waiter first = w->second.front();
    w->second.pop_front();
    if (w->second.empty()) job.waiters.erase(w);
    auto it = parked.find(first.parked);
    if (it == parked.end()) continue;
    Parked& p = it->second;
    p.listed[first.slot].active = false;
    const bool answered = conns.count(p.conn) != 0;  // an orphan is answered by no one
    if (p.kind == Parked::Kind::get) {
      if (answered) answer_value(p.conn, p.request_id, value);
      unpark(it);
      continue;
    }
    if (--p.missing > 0) continue;
    // A key that was there when the wait was parked may have been deleted
    // since: the wait goes on until every key exists at once (`key` counts
    // as set: this is its Set's answer, in a later turn maybe).
    for (uint32_t i = 0; i < p.keys.size(); ++i) {
      if (p.listed[i].active || p.keys[i] == key || job.keys.count(p.keys[i])) continue;
      list_waiter(job, first.parked, p, i);
      ++p.missing;
    }
    if (p.missing == 0) {
      if (answered) send(p.conn, p.request_id, Ok{});
      unpark(it);
    }
  }
}

// The next turn of a Set's answers (its deadline is due at once).
void ServerCore::Impl::continue_wake(uint64_t id) {
  auto it = wakes.find(id);
  if (it == wakes.end()) return;
  server_core::PendingWake& pending = it->second;
  pending.timer.reset();  // already erased by expire()
  auto j = jobs_by_serial.find(pending.job);
  if (j == jobs_by_serial.end()) {
    wakes.erase(it);
    return;
  }
  Job& job = *j->second;
  if (!wake_listed(job, pending.key, pending.before, *pending.value)) {
    arm(pending.timer, current_time, DeadlineKind::wake, id);
    return;
  }
  wakes.erase(it);
  orphan_gone(job);
}

}  // namespace cc::rv
