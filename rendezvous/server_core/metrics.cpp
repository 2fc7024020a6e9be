// The rendezvous server's counters as the core keeps them (each section
// increments ServerCounters where its event happens), the cause of an
// announced failure, and the snapshot of counters and gauges the metrics
// endpoint renders: open connections, jobs, each job's members and joiners,
// the requests parked now, and what the store holds.
#include <algorithm>

#include "rendezvous/server_core/state.hpp"

namespace cc::rv {

void ServerCore::Impl::count_failure(const Conn& c, PeerEventKind kind) {
  if (kind == PeerEventKind::aborted)
    counters.failure(FailureCause::abort);
  else if (kind == PeerEventKind::init_failed)
    counters.failure(FailureCause::init);
  else if (c.heartbeat_lost)
    counters.failure(FailureCause::heartbeat);
  else
    counters.failure(FailureCause::disconnect);
}

ServerMetrics ServerCore::Impl::metrics(Clock::time_point now) const {
  ServerMetrics m;
  m.counters = counters;
  m.connections_open = socket_conns();
  m.agent_ranks = channel_conns;
  m.jobs = jobs.size();
  m.store_bytes = total_bytes;
  m.store_bytes_limit = opt.max_total_bytes;
  m.uptime_seconds = std::max(0.0, std::chrono::duration<double>(now - started).count());
  for (const auto& [id, p] : parked) {
    if (p.kind == Parked::Kind::get)
      ++m.parked_gets;
    else if (p.kind == Parked::Kind::wait)
      ++m.parked_waits;
    else
      ++m.parked_joins;
  }
  for (const auto& [id, job] : jobs) {
    m.store_keys += job->keys.size();
    if (job->conns.empty()) ++m.jobs_without_connection;
    if (job->members.empty() && job->joiners == 0) continue;
    m.job_members.push_back({id, job->members.size(), job->joiners});
  }
  std::sort(m.job_members.begin(), m.job_members.end(),
            [](const JobMembers& a, const JobMembers& b) { return a.job < b.job; });
  if (m.job_members.size() > kMaxMetricJobs) {
    m.jobs_not_listed = m.job_members.size() - kMaxMetricJobs;
    m.job_members.resize(kMaxMetricJobs);
  }
  return m;
}

}  // namespace cc::rv
