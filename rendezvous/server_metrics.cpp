// The Prometheus text exposition of the rendezvous server's counters: one
// HELP and TYPE line per family, then its samples; counters end in _total.
#include "rendezvous/server_metrics.hpp"

#include <cstdio>

#include "cc/cc_version.h"

namespace cc::rv {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

void family(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, uint64_t v) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += " " + std::to_string(v) + "\n";
}

// The label value of a kind, from its enum's labels in the order of the enum
// (whose last member is count).
template <typename Kind, size_t N>
const char* label_of(Kind k, const char* const (&labels)[N]) {
  static_assert(N == static_cast<size_t>(Kind::count), "a label for each kind");
  const auto i = static_cast<size_t>(k);
  return i < N ? labels[i] : "unknown";
}

template <typename Kind, size_t N>
void by_label(std::string& out, const std::string& name, const char* label_name,
              const std::string& help, const std::array<uint64_t, N>& values) {
  family(out, name, "counter", help);
  for (size_t i = 0; i < N; ++i)
    sample(out, name, std::string(label_name) + "=\"" + label(static_cast<Kind>(i)) + "\"",
           values[i]);
}

}  // namespace

const char* label(FailureCause c) {
  static constexpr const char* kLabels[] = {"disconnect", "heartbeat", "abort", "init"};
  return label_of(c, kLabels);
}

const char* label(LimitKind k) {
  static constexpr const char* kLabels[] = {
      "max_connections", "max_jobs",    "max_keys_per_job",  "max_bytes_per_job",
      "max_total_bytes", "write_queue", "handshake_timeout", "idle_timeout",
      "max_parked",      "descriptors"};
  return label_of(k, kLabels);
}

const char* label(FrameErrorKind k) {
  static constexpr const char* kLabels[] = {
      "bad_magic",    "bad_version",     "frame_too_large", "truncated", "trailing_bytes",
      "unknown_type", "field_too_large", "bad_field",       "stalled",   "out_of_order"};
  return label_of(k, kLabels);
}

FrameErrorKind frame_error_kind(DecodeError e) {
  switch (e) {
    case DecodeError::bad_magic:
      return FrameErrorKind::bad_magic;
    case DecodeError::bad_version:
      return FrameErrorKind::bad_version;
    case DecodeError::frame_too_large:
      return FrameErrorKind::frame_too_large;
    case DecodeError::truncated:
      return FrameErrorKind::truncated;
    case DecodeError::trailing_bytes:
      return FrameErrorKind::trailing_bytes;
    case DecodeError::unknown_type:
      return FrameErrorKind::unknown_type;
    case DecodeError::field_too_large:
      return FrameErrorKind::field_too_large;
    case DecodeError::none:
    case DecodeError::bad_field:
      break;
  }
  return FrameErrorKind::bad_field;
}

std::string prometheus_label(const std::string& value) {
  std::string out;
  for (size_t i = 0; i < value.size() && i < 128; ++i) {
    const char c = value[i];
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c > 0x7e) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out;
}

std::string prometheus_metric(const std::string& name, const char* type, const std::string& help,
                              uint64_t value) {
  std::string out;
  family(out, name, type, help);
  sample(out, name, "", value);
  return out;
}

std::string prometheus_text(const ServerMetrics& m) {
  const ServerCounters& c = m.counters;
  std::string out;
  out.reserve(4096 + m.job_members.size() * 64);
  family(out, "cc_rendezvous_build_info", "gauge",
         "The cc version of this server; the rendezvous server has no NCCL and no CUDA in it.");
  sample(out, "cc_rendezvous_build_info",
         std::string("version=\"") + CC_VERSION_STRING + "\",protocol=\"" +
             std::to_string(kProtocolVersion) + "\",nccl=\"none\"",
         1);
  out +=
      "# HELP cc_rendezvous_uptime_seconds Seconds since the server started.\n"
      "# TYPE cc_rendezvous_uptime_seconds gauge\n"
      "cc_rendezvous_uptime_seconds " +
      number(m.uptime_seconds) + "\n";
  out += prometheus_metric("cc_rendezvous_connections_open", "gauge",
                           "Connections open now (clients, members, status tools).",
                           m.connections_open);
  out += prometheus_metric("cc_rendezvous_agent_ranks", "gauge",
                           "Ranks reached through node agents now (channels of the agents' "
                           "connections, not counted as connections).",
                           m.agent_ranks);
  out += prometheus_metric("cc_rendezvous_connections_total", "counter",
                           "Connections accepted (refused ones count under limits_hit).",
                           c.connections_accepted);
  out += prometheus_metric("cc_rendezvous_jobs", "gauge",
                           "Jobs the server holds now (with a connection, or kept for their keys).",
                           m.jobs);
  out += prometheus_metric("cc_rendezvous_jobs_without_connection", "gauge",
                           "Jobs with no connection, kept for their keys until deleted or until "
                           "their job TTL passes (--job-ttl).",
                           m.jobs_without_connection);
  family(out, "cc_rendezvous_job_members", "gauge",
         "Members of each job with a member or a pending join: state=\"member\" completed a "
         "join, state=\"joining\" waits for the others.");
  for (const JobMembers& j : m.job_members) {
    const std::string job = "job=\"" + prometheus_label(j.job) + "\"";
    sample(out, "cc_rendezvous_job_members", job + ",state=\"member\"", j.members);
    sample(out, "cc_rendezvous_job_members", job + ",state=\"joining\"", j.joining);
  }
  out += prometheus_metric("cc_rendezvous_jobs_not_listed", "gauge",
                           "Jobs with members left out of cc_rendezvous_job_members (over " +
                               std::to_string(kMaxMetricJobs) + ").",
                           m.jobs_not_listed);
  out += prometheus_metric("cc_rendezvous_joins_total", "counter",
                           "Join requests (one per rank per communicator generation).", c.joins);
  family(out, "cc_rendezvous_generations_total", "counter",
         "Communicator generations whose join completed or failed.");
  sample(out, "cc_rendezvous_generations_total", "result=\"completed\"", c.generations_completed);
  sample(out, "cc_rendezvous_generations_total", "result=\"failed\"", c.generations_failed);
  out += prometheus_metric("cc_rendezvous_leaves_total", "counter",
                           "Members that left cleanly (cc_comm_destroy).", c.leaves);
  by_label<FailureCause>(out, "cc_rendezvous_failures_announced_total", "cause",
                         "Members announced to their job as failed, by cause.", c.failures);
  out += prometheus_metric("cc_rendezvous_auth_refusals_total", "counter",
                           "Connections refused for a wrong or missing token.", c.auth_refusals);
  by_label<FrameErrorKind>(out, "cc_rendezvous_frame_errors_total", "kind",
                           "Connections dropped for a malformed, stalled or out-of-order frame.",
                           c.frame_errors);
  by_label<LimitKind>(out, "cc_rendezvous_limits_hit_total", "limit",
                      "Requests or connections refused or dropped at a limit or deadline.",
                      c.limits);
  out += prometheus_metric("cc_rendezvous_received_bytes_total", "counter",
                           "Bytes read from clients.", c.bytes_in);
  out += prometheus_metric("cc_rendezvous_sent_bytes_total", "counter", "Bytes queued to clients.",
                           c.bytes_out);
  family(out, "cc_rendezvous_parked", "gauge",
         "Requests waiting on the server now: a get or wait for a key, a join for the other "
         "ranks.");
  sample(out, "cc_rendezvous_parked", "kind=\"get\"", m.parked_gets);
  sample(out, "cc_rendezvous_parked", "kind=\"wait\"", m.parked_waits);
  sample(out, "cc_rendezvous_parked", "kind=\"join\"", m.parked_joins);
  out += prometheus_metric("cc_rendezvous_store_keys", "gauge", "Keys held over every job.",
                           m.store_keys);
  out += prometheus_metric("cc_rendezvous_store_bytes", "gauge",
                           "Bytes of keys and values held over every job (what --max-total-bytes "
                           "bounds).",
                           m.store_bytes);
  out += prometheus_metric("cc_rendezvous_store_bytes_limit", "gauge",
                           "The server's limit on cc_rendezvous_store_bytes (--max-total-bytes); a "
                           "write that would pass it is refused.",
                           m.store_bytes_limit);
  out += prometheus_metric("cc_rendezvous_jobs_expired_total", "counter",
                           "Jobs forgotten, with their keys, after their job TTL passed with no "
                           "connection (--job-ttl).",
                           c.jobs_expired);
  out += prometheus_metric("cc_rendezvous_keys_expired_total", "counter",
                           "Keys dropped with the jobs that expired.", c.keys_expired);
  out += prometheus_metric("cc_rendezvous_status_queries_total", "counter",
                           "Status reports asked for (cc-rendezvous status).", c.status_queries);
  return out;
}

}  // namespace cc::rv
