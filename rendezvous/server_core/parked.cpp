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
#include <algorithm>
#include <string>
#include <vector>

#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::key_list;
using server_core::quote;

uint64_t ServerCore::Impl::park(Conn& c, Parked p, Clock::time_point now) {
  const uint64_t id = next_parked++;
  p.conn = c.id;
  auto& slot = parked.emplace(id, std::move(p)).first->second;
  if (slot.timeout_ms > 0)
    arm(slot.timer, now + std::chrono::milliseconds(slot.timeout_ms), DeadlineKind::parked, id);
  c.parked.push_back(id);
  return id;
}

// Takes a Get or Wait off the waiter lists of its job's keys (a job's keys
// may outlive many requests that timed out or whose connection went).
void ServerCore::Impl::unlist_waiter(const Parked& p, uint64_t id) {
  if (p.kind == Parked::Kind::join) return;
  auto unlist = [&](const std::string& key) {
    auto w = p.job->waiters.find(key);
    if (w == p.job->waiters.end()) return;
    auto& ids = w->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) p.job->waiters.erase(w);
  };
  if (p.kind == Parked::Kind::get) unlist(p.key);
  for (const auto& k : p.keys) unlist(k);
}

// Finishes a parked request without answering it.
void ServerCore::Impl::finish_parked(uint64_t id) {
  auto it = parked.find(id);
  if (it == parked.end()) return;
  unlist_waiter(it->second, id);
  disarm(it->second.timer);
  auto cit = conns.find(it->second.conn);
  if (cit != conns.end()) {
    auto& v = cit->second->parked;
    v.erase(std::remove(v.begin(), v.end(), id), v.end());
  }
  parked.erase(it);
}

// The connection is going: a pending join gives up its slot, a pending step
// of the reachability test is no longer waited for.
void ServerCore::Impl::cancel_parked(uint64_t id) {
  auto it = parked.find(id);
  if (it == parked.end()) return;
  Parked& p = it->second;
  if (p.kind == Parked::Kind::join) release_join_slot(p);
  unlist_waiter(p, id);
  if (p.kind == Parked::Kind::recover) recovery_parked_gone(id, p);
  if (p.kind == Parked::Kind::preflight) {
    auto g = p.job->generations.find(p.generation);
    if (g != p.job->generations.end()) {
      auto& members = g->second.preflight.members;
      if (p.rank >= 0 && static_cast<size_t>(p.rank) < members.size() &&
          members[static_cast<size_t>(p.rank)].parked == id)
        members[static_cast<size_t>(p.rank)].parked = 0;
    }
  }
  disarm(p.timer);
  auto cit = conns.find(p.conn);
  if (cit != conns.end()) {
    auto& v = cit->second->parked;
    v.erase(std::remove(v.begin(), v.end(), id), v.end());
  }
  parked.erase(it);
}

void ServerCore::Impl::release_join_slot(const Parked& p) {
  Job& job = *p.job;
  auto g = job.generations.find(p.generation);
  if (g == job.generations.end()) return;
  Generation& gen = g->second;
  auto s = gen.slots.find(p.rank);
  if (gen.state == Generation::State::joining && s != gen.slots.end() && s->second.conn == p.conn) {
    const MemberInfo& info = s->second.info;
    if (!info.gpu_uuid.empty()) gen.gpu_owner.erase(gpu_owner_key(info));
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
  if (p.kind == Parked::Kind::get) {
    send_error(p.conn, p.request_id, CC_ERR_TIMEOUT,
               "key " + quote(p.key) + " of job " + quote(job.id) + " was not set within " +
                   std::to_string(p.timeout_ms) +
                   " ms; check that the rank that sets it is running and uses the same job id "
                   "and rendezvous server");
    finish_parked(id);
  } else if (p.kind == Parked::Kind::wait) {
    std::vector<std::string> missing;
    for (const auto& k : p.keys)
      if (!job.keys.count(k) && std::find(missing.begin(), missing.end(), k) == missing.end())
        missing.push_back(k);
    send_error(p.conn, p.request_id, CC_ERR_TIMEOUT,
               "wait on job " + quote(job.id) + " timed out after " + std::to_string(p.timeout_ms) +
                   " ms; still missing: " + key_list(missing) +
                   "; check that the ranks that set them are running and use the same job id");
    finish_parked(id);
  } else if (p.kind == Parked::Kind::recover) {
    recovery_parked_expired(id, p);
  } else if (p.kind == Parked::Kind::preflight) {
    preflight_expired(p);
  } else {
    join_timeout(job, p);
  }
}

// The key was just set: answers the Gets parked on it, and the Waits for
// which it was the last missing key.
void ServerCore::Impl::wake(Job& job, const std::string& key) {
  auto w = job.waiters.find(key);
  if (w == job.waiters.end()) return;
  std::vector<uint64_t> ids = std::move(w->second);
  job.waiters.erase(w);
  const std::vector<uint8_t>& value = job.keys[key];
  for (uint64_t id : ids) {
    auto it = parked.find(id);
    if (it == parked.end()) continue;  // timed out or its connection went
    Parked& p = it->second;
    if (p.kind == Parked::Kind::get) {
      send(p.conn, p.request_id, Value{value});
      finish_parked(id);
    } else if (p.kind == Parked::Kind::wait && --p.missing == 0) {
      // A key that was there when the wait was parked may have been deleted
      // since: the wait goes on until every key exists at once.
      for (const auto& k : p.keys) {
        if (job.keys.count(k)) continue;
        auto& list = job.waiters[k];
        if (std::find(list.begin(), list.end(), id) != list.end()) continue;
        list.push_back(id);
        ++p.missing;
      }
      if (p.missing == 0) {
        send(p.conn, p.request_id, Ok{});
        finish_parked(id);
      }
    }
  }
}

}  // namespace cc::rv
