#include "tools/cc-rendezvous/status_render.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>

#include "common/enum_names.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::tools::rendezvous {
namespace {

std::string seconds(uint64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

std::string span_text(uint64_t ms) {
  const uint64_t s = ms / 1000;
  if (s < 120) return std::to_string(s) + " s";
  if (s < 7200) return std::to_string(s / 60) + " min";
  return std::to_string(s / 3600) + " h " + std::to_string(s / 60 % 60) + " min";
}

// "512 B", "1.5 KiB", "64.0 MiB".
std::string size_text(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

// What a job holds and, without a connection, how long it is kept.
std::string job_line(const rv::JobStatus& j) {
  const std::string keys =
      std::to_string(j.keys) + (j.keys == 1 ? " key" : " keys") + " (" + size_text(j.bytes) + ")";
  if (j.connections > 0)
    return std::to_string(j.connections) +
           (j.connections == 1 ? " connection, " : " connections, ") + keys;
  return "no connection; " + keys +
         (j.expires_in_ms > 0 ? " kept " + span_text(j.expires_in_ms) + " more (job TTL)"
                              : " kept until deleted");
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s + " ";
}

std::string member_who(const rv::MemberStatus& m) { return cc::who(m.rank, m.host, m.pid); }

}  // namespace

constexpr std::array kMemberStateNames{"joining", "member", "left", "failed", "aborted"};

const char* state_name(rv::MemberState s) {
  return cc::enum_name<rv::MemberState::joining, rv::MemberState::aborted>(kMemberStateNames, s,
                                                                           "unknown");
}

constexpr std::array kJoinStateNames{"joining", "complete", "failed"};

const char* state_name(rv::JoinState s) {
  return cc::enum_name<rv::JoinState::joining, rv::JoinState::failed>(kJoinStateNames, s,
                                                                      "unknown");
}

std::vector<Behind> behind(const rv::CommStatus& g) {
  std::vector<const rv::MemberStatus*> live;
  for (const auto& m : g.members)
    if (m.state == rv::MemberState::member) live.push_back(&m);
  std::vector<Behind> out;
  if (live.empty()) return out;
  const rv::MemberStatus* ahead = *std::max_element(
      live.begin(), live.end(),
      [](const auto* a, const auto* b) { return a->last_completed < b->last_completed; });
  std::vector<uint32_t> ages;
  for (const auto* m : live) ages.push_back(m->heartbeat_age_ms);
  const size_t mid = (ages.size() - 1) / 2;  // the lower median: of two, the fresher
  std::nth_element(ages.begin(), ages.begin() + static_cast<std::ptrdiff_t>(mid), ages.end());
  const uint64_t median = ages[mid];
  const uint64_t silent_after = std::max<uint64_t>(kSilentMs, 3 * median);
  for (const auto* m : live) {
    std::string why;
    if (m->heartbeat_age_ms >= silent_after) why = "silent for " + seconds(m->heartbeat_age_ms);
    if (m->last_completed < ahead->last_completed) {
      const uint64_t gap = ahead->last_completed - m->last_completed;
      why += (why.empty() ? "" : ", ") + std::to_string(gap) + (gap == 1 ? " op" : " ops") +
             " behind rank " + std::to_string(ahead->rank) + " (op #" +
             std::to_string(m->last_completed) + " against #" +
             std::to_string(ahead->last_completed) + ")";
    }
    if (!why.empty()) out.push_back({m->rank, why});
  }
  return out;
}

std::string status_text(const rv::StatusReport& r, const std::string& endpoint) {
  std::string out = printable(r.server) + " at " + endpoint + ", up " + span_text(r.uptime_ms) +
                    "; " + std::to_string(r.jobs_total) + (r.jobs_total == 1 ? " job" : " jobs");
  if (r.jobs.size() < r.jobs_total) out += " (" + std::to_string(r.jobs.size()) + " shown)";
  out += "; store " + size_text(r.store_bytes) + " of " + size_text(r.store_bytes_limit) + "\n";
  if (r.members_omitted > 0)
    out += std::to_string(r.members_omitted) +
           " members left out to keep the report small; ask for one job with --job\n";
  for (const rv::JobStatus& j : r.jobs) {
    out += "\njob '" + printable(j.id) + "': " + job_line(j) + "\n";
    if (j.comms.empty() && j.connections > 0) out += "  no communicator (store clients only)\n";
    for (const rv::CommStatus& g : j.comms) {
      out += "  communicator " + std::to_string(g.comm_number) + ": " + state_name(g.state) + ", " +
             std::to_string(g.joined) + " of " + std::to_string(g.world_size) + " ranks joined\n";
      if (!g.failure.empty()) out += "    failed: " + printable(g.failure) + "\n";
      if (!g.members.empty()) {
        out += "    " + pad("rank", 5) + pad("state", 8) + pad("host", 16) + pad("pid", 8) +
               pad("address", 22) + pad("nccl address", 16) + pad("heartbeat", 10) + "last op\n";
        for (const rv::MemberStatus& m : g.members) {
          const bool live = m.state == rv::MemberState::member;
          out += "    " + pad(std::to_string(m.rank), 5) + pad(state_name(m.state), 8) +
                 pad(printable(m.host), 16) + pad(std::to_string(m.pid), 8) +
                 pad(m.peer.empty() ? "-" : printable(m.peer), 22) +
                 pad(m.nccl_addr.empty() ? "-" : printable(m.nccl_addr), 16) +
                 pad(live ? seconds(m.heartbeat_age_ms) : "-", 10) + "#" +
                 std::to_string(m.last_completed) + "\n";
        }
      }
      if (g.state == rv::JoinState::joining && g.world_size > g.joined) {
        const int32_t n = g.world_size - g.joined;
        const size_t unlisted = static_cast<size_t>(n) - std::min(g.missing.size(), size_t(n));
        if (g.missing.empty())
          out += "    missing: " + std::to_string(n) + " of " + std::to_string(g.world_size) +
                 " ranks not joined yet (not listed: the report is full; ask for this job with "
                 "--job)\n";
        else
          out += "    missing: " + std::string(n == 1 ? "rank " : "ranks ") +
                 rv::server_core::rank_ranges(g.missing) +
                 (unlisted > 0 ? " and " + std::to_string(unlisted) + " more" : "") + " (" +
                 std::to_string(n) + " of " + std::to_string(g.world_size) + ") not joined yet\n";
      }
      for (const rv::MemberStatus& m : g.members) {
        if (m.state == rv::MemberState::failed || m.state == rv::MemberState::aborted)
          out += "    " + std::string(state_name(m.state)) + ": " + member_who(m) +
                 (m.peer.empty() ? "" : " at " + printable(m.peer)) + ": " +
                 (m.reason.empty() ? "no reason given" : printable(m.reason)) + "\n";
        else if (m.state == rv::MemberState::left && g.state == rv::JoinState::complete)
          out += "    left: " + member_who(m) + " (cleanly)\n";
      }
      std::map<int32_t, const rv::MemberStatus*> by_rank;
      for (const auto& m : g.members) by_rank[m.rank] = &m;
      for (const Behind& b : behind(g))
        out += "    behind: " + member_who(*by_rank.at(b.rank)) + ": " + b.why + "\n";
    }
  }
  return out;
}

nlohmann::ordered_json status_json(const rv::StatusReport& r, const std::string& endpoint) {
  using json = nlohmann::ordered_json;
  json out;
  out["server"] = r.server;
  out["endpoint"] = endpoint;
  out["uptime_ms"] = r.uptime_ms;
  out["jobs_total"] = r.jobs_total;
  out["members_omitted"] = r.members_omitted;
  out["store_bytes"] = r.store_bytes;
  out["store_bytes_limit"] = r.store_bytes_limit;
  json jobs = json::array();
  for (const rv::JobStatus& j : r.jobs) {
    json job;
    job["id"] = j.id;
    job["connections"] = j.connections;
    job["keys"] = j.keys;
    job["bytes"] = j.bytes;
    job["expires_in_ms"] = j.expires_in_ms > 0 ? json(j.expires_in_ms) : json(nullptr);
    json comms = json::array();
    for (const rv::CommStatus& g : j.comms) {
      std::map<int32_t, std::string> late;
      for (Behind& b : behind(g)) late[b.rank] = std::move(b.why);
      json gen;
      gen["communicator"] = g.comm_number;
      gen["state"] = state_name(g.state);
      gen["world_size"] = g.world_size;
      gen["joined"] = g.joined;
      gen["failure"] = g.failure;
      gen["missing"] = g.missing;
      json members = json::array();
      for (const rv::MemberStatus& m : g.members) {
        json member;
        member["rank"] = m.rank;
        member["state"] = state_name(m.state);
        member["host"] = m.host;
        member["pid"] = m.pid;
        member["address"] = m.peer;
        member["nccl_address"] = m.nccl_addr;
        member["last_completed"] = m.last_completed;
        member["heartbeat_age_ms"] = m.heartbeat_age_ms;
        member["heartbeat_window_ms"] = m.heartbeat_window_ms;
        member["reason"] = m.reason;
        auto it = late.find(m.rank);
        member["behind"] = it == late.end() ? json(nullptr) : json(it->second);
        members.push_back(std::move(member));
      }
      gen["members"] = std::move(members);
      comms.push_back(std::move(gen));
    }
    job["communicators"] = std::move(comms);
    jobs.push_back(std::move(job));
  }
  out["jobs"] = std::move(jobs);
  return out;
}

}  // namespace cc::tools::rendezvous
