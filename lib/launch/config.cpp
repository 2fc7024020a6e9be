#include "lib/launch/config.hpp"

#include <climits>
#include <cstddef>

#include "common/return_if_error.hpp"
#include "common/token_file.hpp"
#include "rendezvous/store.hpp"

namespace cc::launch {
namespace {

using settings::Id;

// True when the caller's struct (of config->size bytes) has the field that
// ends at `end` bytes: an older header simply lacks the later fields.
bool has_field(const cc_config_t* config, size_t end) {
  return config != nullptr && config->size >= end;
}

#define CC_FIELD_END(field) (offsetof(cc_config_t, field) + sizeof(cc_config_t::field))

// An int field: the config's value when defined, else the setting's
// variable, else *out as it came. The setting's minimum applies to both.
Status resolve_int(const cc_config_t* config, size_t end, int cc_config_t::*field,
                   const char* field_name, const settings::Getenv& getenv, Id id, int* out) {
  const long long min = settings::get(id).min;
  if (has_field(config, end) && config->*field != CC_CONFIG_UNDEF_INT) {
    const int v = config->*field;
    if (v < min) {
      return invalid_argument("config." + std::string(field_name) + "=" + std::to_string(v) +
                     " is out of range: use a value of at least " + std::to_string(min) +
                     " (or leave it undefined for the default)");
    }
    *out = v;
    return Status::success();
  }
  long long v = *out;
  CC_RETURN_IF_ERROR(settings::read_int(id, getenv, &v));
  *out = static_cast<int>(v);
  return Status::success();
}

// A path or name: the config's text when not NULL ("" = none), else the
// setting's variable, else empty.
std::string resolve_text(const cc_config_t* config, size_t end, const char* cc_config_t::*field,
                         const settings::Getenv& getenv, Id id) {
  if (has_field(config, end) && config->*field != CC_CONFIG_UNDEF_PTR) return config->*field;
  const settings::Found f = settings::find(id, getenv);
  return f.value != nullptr ? f.value : "";
}

#define CC_RESOLVE_TEXT(field, id) \
  resolve_text(config, CC_FIELD_END(field), &cc_config_t::field, getenv, Id::id)

}  // namespace

Status resolve_config(const cc_config_t* config, const settings::Getenv& getenv,
                      ResolvedConfig* out) {
  if (config != nullptr) {
    if (config->magic != CC_CONFIG_MAGIC) {
      return invalid_argument(
          "config was not initialised with CC_CONFIG_INIT: declare it as "
          "'cc_config_t config = CC_CONFIG_INIT;' and then set the fields you need");
    }
    if (config->size < CC_FIELD_END(version) || config->size > (1u << 16)) {
      return invalid_argument("config has an impossible size " + std::to_string(config->size) +
                     ": declare it as 'cc_config_t config = CC_CONFIG_INIT;'");
    }
  }

  ResolvedConfig r;
  r.device = -1;
  r.job_id = settings::get(Id::job_id).default_text;
  r.heartbeat_ms = static_cast<int>(settings::default_int(Id::heartbeat_ms));
  r.heartbeat_misses = static_cast<int>(settings::default_int(Id::heartbeat_misses));
  CC_RETURN_IF_ERROR(resolve_int(config, CC_FIELD_END(device), &cc_config_t::device, "device",
                                 getenv, Id::device, &r.device));

  int timeout = 0;
  CC_RETURN_IF_ERROR(resolve_int(config, CC_FIELD_END(timeout_ms), &cc_config_t::timeout_ms,
                                 "timeout_ms", getenv, Id::timeout_ms, &timeout));
  r.timeout_ms = timeout == 0 ? static_cast<int>(settings::default_int(Id::timeout_ms)) : timeout;

  if (has_field(config, CC_FIELD_END(job_id)) && config->job_id != nullptr) {
    if (*config->job_id == '\0') {
      return invalid_argument("config.job_id is empty: use NULL for the default or a non-empty name");
    }
    CC_RETURN_IF_ERROR(rv::check_job_id(config->job_id, "config.job_id"));
    r.job_id = config->job_id;
  } else if (const settings::Found job = settings::find(Id::job_id, getenv); job.var) {
    if (*job.value == '\0') {
      return invalid_argument(std::string(job.var) + "='' is empty: unset it or give the job a name");
    }
    CC_RETURN_IF_ERROR(rv::check_job_id(job.value, job.var));
    r.job_id = job.value;
  }

  if (has_field(config, CC_FIELD_END(token)) && config->token != nullptr) {
    r.token = config->token;  // "" = explicitly no token
  } else if (const settings::Found token = settings::find(Id::token, getenv); token.var) {
    if (*token.value == '\0') {
      return invalid_argument(std::string(token.var) +
                     "='' is empty: unset it or set it to the shared token");
    }
    r.token = token.value;
  } else if (const settings::Found path = settings::find(Id::token_file, getenv); path.var) {
    CC_RETURN_IF_ERROR(read_token_file(path.value, path.var, &r.token));
  }

  if (has_field(config, CC_FIELD_END(rendezvous)) && config->rendezvous != CC_CONFIG_UNDEF_INT) {
    if (config->rendezvous != CC_RENDEZVOUS_EMBEDDED &&
        config->rendezvous != CC_RENDEZVOUS_EXTERNAL) {
      return invalid_argument("config.rendezvous=" + std::to_string(config->rendezvous) +
                     " is neither CC_RENDEZVOUS_EMBEDDED nor CC_RENDEZVOUS_EXTERNAL");
    }
    r.rendezvous = config->rendezvous;
  } else {
    int mode = 0;  // the order of the setting's choices: embedded, external
    CC_RETURN_IF_ERROR(settings::read_choice(Id::rendezvous, getenv, &mode));
    r.rendezvous = mode == 0 ? CC_RENDEZVOUS_EMBEDDED : CC_RENDEZVOUS_EXTERNAL;
  }

  CC_RETURN_IF_ERROR(resolve_int(config, CC_FIELD_END(heartbeat_ms), &cc_config_t::heartbeat_ms,
                                 "heartbeat_ms", getenv, Id::heartbeat_ms, &r.heartbeat_ms));
  CC_RETURN_IF_ERROR(resolve_int(config, CC_FIELD_END(heartbeat_misses),
                                 &cc_config_t::heartbeat_misses, "heartbeat_misses", getenv,
                                 Id::heartbeat_misses, &r.heartbeat_misses));

  if (has_field(config, CC_FIELD_END(fast_allreduce)) &&
      config->fast_allreduce != CC_CONFIG_UNDEF_INT) {
    if (config->fast_allreduce < CC_FAST_ALLREDUCE_OFF ||
        config->fast_allreduce > CC_FAST_ALLREDUCE_REQUIRE) {
      return invalid_argument("config.fast_allreduce=" + std::to_string(config->fast_allreduce) +
                     " is none of CC_FAST_ALLREDUCE_OFF, _AUTO and _REQUIRE");
    }
    r.fast_allreduce = config->fast_allreduce;
  } else {
    // The setting's choices "0", "1", "require" are CC_FAST_ALLREDUCE_OFF, _AUTO, _REQUIRE.
    int mode = CC_FAST_ALLREDUCE_AUTO;
    CC_RETURN_IF_ERROR(settings::read_choice(Id::fast_allreduce, getenv, &mode));
    r.fast_allreduce = mode;
  }

  if (has_field(config, CC_FIELD_END(fast_allreduce_plan)) &&
      config->fast_allreduce_plan != CC_CONFIG_UNDEF_PTR) {
    r.fast_allreduce_plan = config->fast_allreduce_plan;
    r.fast_allreduce_plan_source = "config.fast_allreduce_plan";
  } else if (const settings::Found f = settings::find(Id::fast_allreduce_plan, getenv);
             f.var != nullptr) {
    r.fast_allreduce_plan = f.value;
    r.fast_allreduce_plan_source = f.var;
  }
  if (r.fast_allreduce_plan.empty()) r.fast_allreduce_plan = "auto";

  if (const settings::Found f = settings::find(Id::cache_dir, getenv); f.var != nullptr) {
    r.cache_dir = f.value;  // "" = keep nothing
  } else if (const char* xdg = getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    r.cache_dir = std::string(xdg) + "/cc";
  } else if (const char* home = getenv("HOME"); home != nullptr && *home == '/') {
    r.cache_dir = std::string(home) + "/.cache/cc";
  }

  CC_RETURN_IF_ERROR(resolve_int(config, CC_FIELD_END(job_ttl_ms), &cc_config_t::job_ttl_ms,
                                 "job_ttl_ms", getenv, Id::job_ttl_ms, &r.job_ttl_ms));

  int shrink = 1;  // the setting's choices: "0", "1"
  CC_RETURN_IF_ERROR(settings::read_choice(Id::nccl_shrink, getenv, &shrink));
  r.nccl_shrink = shrink == 1;

  int share = 0;  // the setting's choices: 0, 1, off, on, false, true
  settings::Found shared_by;
  CC_RETURN_IF_ERROR(settings::read_choice(Id::share_gpu, getenv, &share, &shared_by));
  r.share_gpu = share % 2 == 1;
  if (r.share_gpu) {
    // Processes sharing a GPU as separate hosts cannot map each other's
    // memory the way cc's kernels need.
    if (r.fast_allreduce == CC_FAST_ALLREDUCE_REQUIRE)
      return invalid_argument(std::string(shared_by.var) +
                     " puts ranks on one GPU as separate hosts, where cc's all-reduce kernels "
                     "cannot run, but CC_FAST_ALLREDUCE=require (or config.fast_allreduce) "
                     "asks for them: drop one of the two");
    r.fast_allreduce = CC_FAST_ALLREDUCE_OFF;
    if (r.device < 0) r.device = 0;
  }

  int check = 1;  // the setting's choices: "0", "1", "off", "on", "false", "true"
  CC_RETURN_IF_ERROR(settings::read_choice(Id::check_calls, getenv, &check));
  r.check_calls = check % 2 == 1;
  long long trace_buffer = settings::default_int(Id::trace_buffer);
  CC_RETURN_IF_ERROR(settings::read_int(Id::trace_buffer, getenv, &trace_buffer));
  r.trace_buffer = static_cast<int>(trace_buffer);
  if (const settings::Found f = settings::find(Id::trace_dir, getenv); f.var != nullptr)
    r.trace_dir = f.value;
  // cc-run's node agent carries its own job's communicators alone (the job
  // cc-run names in CC_JOB_ID); one of another job, as a program may make
  // with a rendezvous of its own, reaches that rendezvous directly.
  if (const settings::Found f = settings::find(Id::agent_socket, getenv); f.var != nullptr) {
    const settings::Found job = settings::find(Id::job_id, getenv);
    if (job.var != nullptr && r.job_id == job.value) r.agent_socket = f.value;
  }
  long long per_id = settings::default_int(Id::nccl_ranks_per_id);
  CC_RETURN_IF_ERROR(settings::read_int(Id::nccl_ranks_per_id, getenv, &per_id));
  r.nccl_ranks_per_id = static_cast<int>(per_id);

  r.tls.ca = CC_RESOLVE_TEXT(tls_ca, tls_ca);
  r.tls.server_name = CC_RESOLVE_TEXT(tls_server_name, tls_server_name);
  r.tls.cert = CC_RESOLVE_TEXT(tls_cert, tls_cert);
  r.tls.key = CC_RESOLVE_TEXT(tls_key, tls_key);
  r.tls_server.cert = r.tls.cert;
  r.tls_server.key = r.tls.key;
  r.tls_server.client_ca = CC_RESOLVE_TEXT(tls_client_ca, tls_client_ca);

  *out = std::move(r);
  return Status::success();
}

}  // namespace cc::launch
