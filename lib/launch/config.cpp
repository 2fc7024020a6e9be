#include "lib/launch/config.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/log.hpp"

namespace cc {
namespace {

constexpr int kDefaultTimeoutMs = 300000;

Status invalid(std::string message) {
  return make_status(CC_ERR_INVALID_ARGUMENT, std::move(message));
}

// True when the caller's struct (of config->size bytes) has the field that
// ends at `end` bytes: an older header simply lacks the later fields.
bool has_field(const cc_config_t* config, size_t end) {
  return config != nullptr && config->size >= end;
}

#define CC_FIELD_END(field) (offsetof(cc_config_t, field) + sizeof(cc_config_t::field))

// An int field: the config's value when defined, else the variable, else the
// default. `min` applies to both sources.
Status resolve_int(const cc_config_t* config, size_t end, int cc_config_t::*field,
                   const char* field_name, const env::Getenv& getenv, const char* var,
                   long long min, int* out) {
  if (has_field(config, end) && config->*field != CC_CONFIG_UNDEF_INT) {
    const int v = config->*field;
    if (v < min) {
      return invalid("config." + std::string(field_name) + "=" + std::to_string(v) +
                     " is out of range: use a value of at least " + std::to_string(min) +
                     " (or leave it undefined for the default)");
    }
    *out = v;
    return Status::success();
  }
  if (const char* text = getenv(var)) {
    long long v = 0;
    if (Status s = env::parse_int(var, text, min, INT_MAX, &v); !s.ok()) return s;
    *out = static_cast<int>(v);
  }
  return Status::success();
}

std::string strip_trailing_space(std::string s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) {
    s.pop_back();
  }
  return s;
}

Status read_token_file(const char* path, std::string* token) {
  if (*path == '\0') {
    return invalid("CC_RENDEZVOUS_TOKEN_FILE='' is empty: set it to a file holding the token");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return invalid("cannot read the token file '" + std::string(path) +
                   "' (from CC_RENDEZVOUS_TOKEN_FILE): " + std::strerror(err) +
                   ". Check the path and its permissions");
  }
  std::ostringstream content;
  content << in.rdbuf();
  *token = strip_trailing_space(content.str());
  if (token->empty()) {
    return invalid("the token file '" + std::string(path) +
                   "' (from CC_RENDEZVOUS_TOKEN_FILE) is empty: put the shared token in it");
  }
  struct stat st {};
  if (::stat(path, &st) == 0 && (st.st_mode & 077) != 0) {
    log().warn("the token file '{}' can be read by other users (mode {:o}): chmod 600 it", path,
               st.st_mode & 0777);
  }
  return Status::success();
}

}  // namespace

Status resolve_config(const cc_config_t* config, const env::Getenv& getenv, ResolvedConfig* out) {
  if (config != nullptr) {
    if (config->magic != CC_CONFIG_MAGIC) {
      return invalid(
          "config was not initialised with CC_CONFIG_INIT: declare it as "
          "'cc_config_t config = CC_CONFIG_INIT;' and then set the fields you need");
    }
    if (config->size < CC_FIELD_END(version) || config->size > (1u << 16)) {
      return invalid("config has an impossible size " + std::to_string(config->size) +
                     ": declare it as 'cc_config_t config = CC_CONFIG_INIT;'");
    }
  }

  ResolvedConfig r;
  if (Status s = resolve_int(config, CC_FIELD_END(device), &cc_config_t::device, "device", getenv,
                             "CC_DEVICE", 0, &r.device);
      !s.ok()) {
    return s;
  }

  int timeout = 0;
  if (Status s = resolve_int(config, CC_FIELD_END(timeout_ms), &cc_config_t::timeout_ms,
                             "timeout_ms", getenv, "CC_TIMEOUT_MS", 0, &timeout);
      !s.ok()) {
    return s;
  }
  r.timeout_ms = timeout == 0 ? kDefaultTimeoutMs : timeout;

  if (has_field(config, CC_FIELD_END(job_id)) && config->job_id != nullptr) {
    if (*config->job_id == '\0') {
      return invalid("config.job_id is empty: use NULL for the default or a non-empty name");
    }
    r.job_id = config->job_id;
  } else if (const char* job = getenv("CC_JOB_ID")) {
    if (*job == '\0') return invalid("CC_JOB_ID='' is empty: unset it or give the job a name");
    r.job_id = job;
  }

  if (has_field(config, CC_FIELD_END(token)) && config->token != nullptr) {
    r.token = config->token;  // "" = explicitly no token
  } else if (const char* token = getenv("CC_RENDEZVOUS_TOKEN")) {
    if (*token == '\0') {
      return invalid("CC_RENDEZVOUS_TOKEN='' is empty: unset it or set it to the shared token");
    }
    r.token = token;
  } else if (const char* path = getenv("CC_RENDEZVOUS_TOKEN_FILE")) {
    if (Status s = read_token_file(path, &r.token); !s.ok()) return s;
  }

  if (has_field(config, CC_FIELD_END(rendezvous)) && config->rendezvous != CC_CONFIG_UNDEF_INT) {
    if (config->rendezvous != CC_RENDEZVOUS_EMBEDDED &&
        config->rendezvous != CC_RENDEZVOUS_EXTERNAL) {
      return invalid("config.rendezvous=" + std::to_string(config->rendezvous) +
                     " is neither CC_RENDEZVOUS_EMBEDDED nor CC_RENDEZVOUS_EXTERNAL");
    }
    r.rendezvous = config->rendezvous;
  } else if (const char* mode = getenv("CC_RENDEZVOUS")) {
    const std::string m = mode;
    if (m == "embedded") {
      r.rendezvous = CC_RENDEZVOUS_EMBEDDED;
    } else if (m == "external") {
      r.rendezvous = CC_RENDEZVOUS_EXTERNAL;
    } else {
      return invalid("CC_RENDEZVOUS='" + m +
                     "' is neither 'embedded' (rank 0 hosts the server) nor 'external' (a "
                     "running cc-rendezvous or cc-run serves the job)");
    }
  }

  if (Status s = resolve_int(config, CC_FIELD_END(heartbeat_ms), &cc_config_t::heartbeat_ms,
                             "heartbeat_ms", getenv, "CC_HEARTBEAT_MS", 1, &r.heartbeat_ms);
      !s.ok()) {
    return s;
  }
  if (Status s =
          resolve_int(config, CC_FIELD_END(heartbeat_misses), &cc_config_t::heartbeat_misses,
                      "heartbeat_misses", getenv, "CC_HEARTBEAT_MISSES", 1, &r.heartbeat_misses);
      !s.ok()) {
    return s;
  }

  if (has_field(config, CC_FIELD_END(fast_allreduce)) &&
      config->fast_allreduce != CC_CONFIG_UNDEF_INT) {
    if (config->fast_allreduce < CC_FAST_ALLREDUCE_OFF ||
        config->fast_allreduce > CC_FAST_ALLREDUCE_REQUIRE) {
      return invalid("config.fast_allreduce=" + std::to_string(config->fast_allreduce) +
                     " is none of CC_FAST_ALLREDUCE_OFF, _AUTO and _REQUIRE");
    }
    r.fast_allreduce = config->fast_allreduce;
  } else if (const char* mode = getenv("CC_FAST_ALLREDUCE")) {
    const std::string m = mode;
    if (m == "0") {
      r.fast_allreduce = CC_FAST_ALLREDUCE_OFF;
    } else if (m == "1") {
      r.fast_allreduce = CC_FAST_ALLREDUCE_AUTO;
    } else if (m == "require") {
      r.fast_allreduce = CC_FAST_ALLREDUCE_REQUIRE;
    } else {
      return invalid("CC_FAST_ALLREDUCE='" + m +
                     "' is none of 0 (always ncclAllReduce), 1 (cc's small all-reduce kernel "
                     "where it can run; the default) and require (fail where it cannot)");
    }
  }

  *out = std::move(r);
  return Status::success();
}

}  // namespace cc
