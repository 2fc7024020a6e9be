// Every setting cc reads from the environment, declared once (as NCCL's
// NCCL_PARAM does): the variables that give it (the first one set wins), its
// default, the values it takes and what it means. The library, the tools and
// the README's environment table (checked by a unit test) all read this one
// table; nothing else calls getenv for a CC_* variable.
#pragma once

#include <array>
#include <functional>
#include <span>
#include <string>

#include "common/status.hpp"

namespace cc::settings {

// Looks a variable up; nullptr when unset. Tests pass a fake.
using Getenv = std::function<const char*(const char*)>;
Getenv process_env();

enum class Id : int {
  rank,
  world_size,
  local_rank,
  master_addr,
  master_port,
  job_id,
  token,
  token_file,
  rendezvous,
  timeout_ms,
  log_level,
  device,
  heartbeat_ms,
  heartbeat_misses,
  fast_allreduce,
  watchdog,
  fast_allreduce_plan,
  cache_dir,
  job_ttl_ms,
  nccl_shrink,
  preflight,
  etcd_auth_file,
  etcd_ca_file,
  etcd_cert_file,
  etcd_key_file,
  etcd_prefix,
  share_gpu,
  check_calls,
  trace_buffer,
  trace_dir,
  agent_socket,
  nccl_ranks_per_id,
  tls_ca,
  tls_server_name,
  tls_cert,
  tls_key,
  tls_client_ca,
  count
};

enum class Kind { integer, text, choice, path };

struct Setting {
  Id id;
  std::array<const char*, 6> vars;  // in order of precedence; unused entries are null
  Kind kind;
  const char* default_text;            // as a user would write it; "" when there is none
  long long min, max;                  // integer settings
  std::array<const char*, 6> choices;  // choice settings; null-terminated
  const char* meaning;                 // one line
};

const Setting& get(Id id);
std::span<const Setting> all();

// The first variable of `id` that is set (even to ""); var is null when none is.
struct Found {
  const char* var = nullptr;
  const char* value = nullptr;
};
Found find(Id id, const Getenv& getenv);

// An integer setting, checked against its range; its error names the variable.
// Unset: *out keeps its value and *found (if given) gets var == null.
Status read_int(Id id, const Getenv& getenv, long long* out, Found* found = nullptr);
// A choice setting: *index is the position of the value in `choices`.
Status read_choice(Id id, const Getenv& getenv, int* index, Found* found = nullptr);
// The default of an integer setting.
long long default_int(Id id);

// Parses a whole decimal integer in [min, max]; errors name `name`.
Status parse_int(const char* name, const char* text, long long min, long long max, long long* out);

}  // namespace cc::settings
