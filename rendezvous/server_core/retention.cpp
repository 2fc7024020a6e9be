// What a job keeps, and for how long. A job is made by its first connection
// (up to max_jobs, counting jobs kept without a connection). Its two parts
// end apart:
// - Its communicator state (generations: ids, membership, failures) ends when
//   the last connection that joined or was joining has left or gone, so a new
//   join of the same job id starts fresh and never gets a stale id.
// - Its store (keys) outlives every connection: when the last one goes, a job
//   that holds keys is kept for job_ttl (0: for the server's lifetime), and a
//   job that holds none is forgotten at once. A connection arriving in time
//   keeps it; deleting keys is the client's business.
#include <string>

#include "common/log.hpp"
#include "common/who.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::quote;

// The connection's job, made on first use; null when the job limit refuses
// it (the connection was dropped with a message).
ServerCore::Impl::Job* ServerCore::Impl::job_for(Conn& c, uint32_t rid) {
  auto it = jobs.find(c.hello.job_id);
  if (it != jobs.end()) {
    disarm(it->second->ttl_timer);
    return it->second.get();
  }
  if (jobs.size() >= opt.max_jobs) {
    size_t kept = 0;
    for (const auto& [id, job] : jobs) kept += job->conns.empty() ? 1 : 0;
    counters.limit(LimitKind::max_jobs);
    drop(c, rid, CC_ERR_RENDEZVOUS,
         "the rendezvous server is at its limit of " + std::to_string(opt.max_jobs) + " jobs (" +
             std::to_string(kept) +
             " of them have no connection and are kept for their keys until deleted or until "
             "their job TTL passes); wait for other jobs to end, or raise the limit "
             "(cc-rendezvous --max-jobs) or shorten the TTL (cc-rendezvous --job-ttl)");
    return nullptr;
  }
  auto job = std::make_unique<Job>();
  job->id = c.hello.job_id;
  job->serial = next_job_serial++;
  log().info("job {} created (first connection: {} at {})", quote(job->id),
             cc::who(-1, c.hello.host, c.hello.pid), c.peer);
  jobs_by_serial.emplace(job->serial, job.get());
  return jobs.emplace(job->id, std::move(job)).first->second.get();
}

// The connection left the job's communicators (Leave) or is gone; the last
// such connection takes the communicator state with it.
void ServerCore::Impl::rank_gone(Job& job, ConnId id) {
  if (job.ranks.erase(id) == 0 || !job.ranks.empty()) return;
  forget_communicators(job);
}

void ServerCore::Impl::forget_communicators(Job& job) {
  for (const auto& [g, r] : job.resuming) job.joiners -= r.held.size();
  job.resuming.clear();
  if (job.comm_joins.empty()) return;
  log().info("job {}: communicator state forgotten (its last rank left); {} key(s) kept",
             quote(job.id), job.keys.size());
  job.comm_joins.clear();
  job.lineages.clear();
  job.unsettled.clear();
  job.announced.clear();
  job.call_checks.clear();
  job.split_call_checks.clear();
}

// The job's last connection is gone (once the Gets and Waits its
// connections left parked are taken out: parked.cpp).
void ServerCore::Impl::job_unused(Job& job) {
  if (job.parked_bytes > 0) return;
  if (job.keys.empty()) {
    forget_job(job, "its last connection is gone and it holds no keys");
    return;
  }
  if (opt.job_ttl.count() == 0) {
    log().info("job {} has no connection; its {} key(s) ({} bytes) are kept until deleted",
               quote(job.id), job.keys.size(), job.bytes);
    return;
  }
  log().info("job {} has no connection; its {} key(s) ({} bytes) are kept for {} ms (job TTL)",
             quote(job.id), job.keys.size(), job.bytes, opt.job_ttl.count());
  arm(job.ttl_timer, current_time + opt.job_ttl, DeadlineKind::job_ttl, job.serial);
}

ServerCore::Impl::Job& ServerCore::Impl::restored_job(const std::string& id) {
  auto it = jobs.find(id);
  if (it != jobs.end()) return *it->second;
  auto job = std::make_unique<Job>();
  job->id = id;
  job->restored = true;
  job->serial = next_job_serial++;
  jobs_by_serial.emplace(job->serial, job.get());
  return *jobs.emplace(id, std::move(job)).first->second;
}

void ServerCore::Impl::expire_job(uint64_t serial) {
  auto it = jobs_by_serial.find(serial);
  if (it == jobs_by_serial.end()) return;
  Job& job = *it->second;
  job.ttl_timer.reset();  // already erased by expire()
  if (!job.conns.empty() || job.parked_bytes > 0) return;
  ++counters.jobs_expired;
  counters.keys_expired += job.keys.size();
  if (opt.durable) {
    if (Status st = opt.durable->forget_job(job.id); !st.ok())
      log().warn("job {}: its keys stay in {}: {}", quote(job.id), opt.durable->where(), st.message);
  }
  forget_job(job, "no connection for " + std::to_string(opt.job_ttl.count()) +
                      " ms (job TTL): its " + std::to_string(job.keys.size()) + " key(s), " +
                      std::to_string(job.bytes) + " bytes, are dropped");
}

void ServerCore::Impl::forget_job(Job& job, const std::string& why) {
  log().info("job {} forgotten ({})", quote(job.id), why);
  disarm(job.ttl_timer);
  total_bytes -= job.bytes;
  jobs_by_serial.erase(job.serial);
  jobs.erase(job.id);  // job is gone from here on
}

}  // namespace cc::rv

namespace cc::rv {

void ServerCore::restore(const DurableWrite& key) {
  if (!key.value) return;
  impl_->put_key(impl_->restored_job(key.job), key.key, *key.value);
}

void ServerCore::restore(const DurableSession& session) {
  impl_->restored_job(session.job).sessions[session.session] = {session.request_id, session.answer};
}

void ServerCore::restored(Clock::time_point now) {
  impl_->current_time = now;
  for (auto& [id, job] : impl_->jobs)
    if (job->conns.empty()) impl_->job_unused(*job);
}

}  // namespace cc::rv
