// What the rendezvous server counts for its operator, and the Prometheus text
// exposition of it. The core (and the I/O layer, for bytes written) increment
// one ServerCounters on the server's one thread; a ServerMetrics is a copy of
// it with the gauges of that moment, taken on that thread
// (Server::metrics), so whoever renders it needs no lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::rv {

// Why a member was announced as failed: its connection dropped without a
// leave, it missed its heartbeats, it sent Abort, or its init failed after its join.
enum class FailureCause : uint8_t { disconnect, heartbeat, abort, init, count };

// The server's limits and deadlines a client ran into.
enum class LimitKind : uint8_t {
  max_connections,
  max_jobs,
  max_keys_per_job,
  max_bytes_per_job,
  max_total_bytes,
  write_queue,  // a client that does not read its replies
  handshake_timeout,
  idle_timeout,
  max_parked,   // a get or wait past a limit on parked requests
  descriptors,  // a connection accepted only to be refused: the server is out of descriptors
  count
};

// Frames refused: each DecodeError, a frame that stalled past the frame
// deadline, and a well-formed message out of order (no hello first, a
// request before authenticating, a server's message sent by a client).
enum class FrameErrorKind : uint8_t {
  bad_magic,
  bad_version,
  frame_too_large,
  truncated,
  trailing_bytes,
  unknown_type,
  field_too_large,
  bad_field,
  stalled,
  out_of_order,
  count
};

const char* label(FailureCause c);
const char* label(LimitKind k);
const char* label(FrameErrorKind k);
FrameErrorKind frame_error_kind(DecodeError e);

struct ServerCounters {
  uint64_t connections_accepted = 0;
  uint64_t joins = 0;  // Join requests taken (each rank of each generation once)
  uint64_t generations_completed = 0;
  uint64_t generations_failed = 0;
  uint64_t leaves = 0;  // members that left cleanly
  uint64_t auth_refusals = 0;
  uint64_t status_queries = 0;
  uint64_t jobs_expired = 0;  // jobs forgotten after --job-ttl without a connection
  uint64_t keys_expired = 0;  // the keys they held
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  std::array<uint64_t, static_cast<size_t>(FailureCause::count)> failures{};
  std::array<uint64_t, static_cast<size_t>(LimitKind::count)> limits{};
  std::array<uint64_t, static_cast<size_t>(FrameErrorKind::count)> frame_errors{};

  void failure(FailureCause c) { ++failures[static_cast<size_t>(c)]; }
  void limit(LimitKind k) { ++limits[static_cast<size_t>(k)]; }
  void frame_error(FrameErrorKind k) { ++frame_errors[static_cast<size_t>(k)]; }
};

// A job's members (connections that completed a join) and pending joiners.
struct JobMembers {
  std::string job;
  uint64_t members = 0;
  uint64_t joining = 0;
};

// The jobs listed one by one in the exposition; the rest are counted.
inline constexpr size_t kMaxMetricJobs = 1000;

struct ServerMetrics {
  ServerCounters counters;
  uint64_t connections_open = 0;
  uint64_t agent_ranks = 0;  // ranks reached through node agents' connections
  uint64_t jobs = 0;
  uint64_t jobs_without_connection = 0;  // kept for their keys (until the job TTL)
  uint64_t store_keys = 0;               // over every job
  uint64_t store_bytes = 0;              // of keys and values, over every job
  uint64_t store_bytes_limit = 0;        // ServerOptions::max_total_bytes
  uint64_t parked_gets = 0;
  uint64_t parked_waits = 0;
  uint64_t parked_joins = 0;
  std::vector<JobMembers> job_members;  // jobs with a member or a joiner, by job id
  uint64_t jobs_not_listed = 0;         // such jobs over kMaxMetricJobs
  double uptime_seconds = 0;
};

// The Prometheus text exposition (format 0.0.4) of m, with build info
// (version, protocol, and that the server has no NCCL in it).
std::string prometheus_text(const ServerMetrics& m);

// One counter or gauge in the same format, for what a program adds of its own.
std::string prometheus_metric(const std::string& name, const char* type, const std::string& help,
                              uint64_t value);

// A label value as the text format takes it: backslash, quote and newline
// escaped; bytes outside printable ASCII as '?'; at most 128 bytes.
std::string prometheus_label(const std::string& value);

}  // namespace cc::rv
