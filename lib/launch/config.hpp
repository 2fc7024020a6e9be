// A cc_config_t made whole: every undefined field filled from its CC_*
// environment variable or its default, after checking the struct header.
#pragma once

#include <string>

#include "cc/cc.h"
#include "common/status.hpp"
#include "lib/launch/env.hpp"

namespace cc {

struct ResolvedConfig {
  int device = -1;  // -1 = choose from LOCAL_RANK
  int timeout_ms = 300000;
  std::string job_id = "default";
  std::string token;  // empty = none
  int rendezvous = CC_RENDEZVOUS_EMBEDDED;
  int heartbeat_ms = 1000;
  int heartbeat_misses = 5;
  int fast_allreduce = CC_FAST_ALLREDUCE_AUTO;
};

// NULL config = all defaults (still overridden by the environment). A config
// with a wrong magic or size is CC_ERR_INVALID_ARGUMENT ("use CC_CONFIG_INIT").
Status resolve_config(const cc_config_t* config, const env::Getenv& getenv, ResolvedConfig* out);

}  // namespace cc
