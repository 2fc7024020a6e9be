// A cc_config_t made whole: every undefined field filled from its CC_*
// environment variable or its default, after checking the struct header.
#pragma once

#include <string>

#include "cc/cc.h"
#include "common/settings.hpp"
#include "common/status.hpp"
#include "rendezvous/tls/context.hpp"

namespace cc::launch {

// Filled by resolve_config; the defaults live in the settings table.
struct ResolvedConfig {
  int device = -1;  // -1 = choose from LOCAL_RANK
  int timeout_ms = 0;
  std::string job_id;
  std::string token;  // empty = none
  int rendezvous = CC_RENDEZVOUS_EMBEDDED;
  int heartbeat_ms = 0;
  int heartbeat_misses = 0;
  int fast_allreduce = CC_FAST_ALLREDUCE_AUTO;
  // "auto", "measure" or a plan in lib/fast/plan.hpp's text form (checked
  // at init, where the kernels are set up), and where it came from.
  std::string fast_allreduce_plan = "auto";
  std::string fast_allreduce_plan_source = "CC_FAST_ALLREDUCE_PLAN";
  // Where measured all-reduce plans are kept: CC_CACHE_DIR, else
  // $XDG_CACHE_HOME/cc, else $HOME/.cache/cc; empty = nowhere.
  std::string cache_dir;
  // -1 when neither the config nor CC_JOB_TTL_MS sets it: each server then
  // takes its own default (job_ttl_or).
  int job_ttl_ms = -1;
  bool nccl_shrink = true;  // cc_comm_shrink may use ncclCommShrink (CC_NCCL_SHRINK)
  // CC_SHARE_GPU: ranks share one GPU, each its own host to NCCL
  // (lib/launch/share_gpu.hpp); the device defaults to 0 and cc's kernels are off.
  bool share_gpu = false;
  bool check_calls = true;  // compare the ranks' calls (CC_CHECK_CALLS)
  int trace_buffer = 2000;  // calls the flight recorder keeps (CC_TRACE_BUFFER)
  std::string trace_dir;    // where the flight recorder is written (CC_TRACE_DIR); "": nowhere
  // cc-run's node agent (CC_AGENT_SOCKET): a communicator's rendezvous
  // connection goes through it; "": directly.
  std::string agent_socket;
  // CC_NCCL_RANKS_PER_ID: past this many ranks, NCCL's scalable init from
  // several ids (lib/comm/nccl_ids.hpp).
  int nccl_ranks_per_id = 128;
  // TLS to the rendezvous (config.tls_ca, tls_server_name, tls_cert, tls_key,
  // else CC_TLS_CA, CC_TLS_SERVER_NAME, CC_TLS_CERT, CC_TLS_KEY) and of a
  // server this process starts (tls_cert, tls_key, tls_client_ca, else
  // CC_TLS_CERT, CC_TLS_KEY, CC_TLS_CLIENT_CA).
  rv::tls::ClientFiles tls;
  rv::tls::ServerFiles tls_server;

  // The job TTL a server started here uses, in ms (0: its lifetime).
  int job_ttl_or(int server_default_ms) const {
    return job_ttl_ms >= 0 ? job_ttl_ms : server_default_ms;
  }
};

// NULL config = all defaults (still overridden by the environment). A config
// with a wrong magic or size is CC_ERR_INVALID_ARGUMENT ("use CC_CONFIG_INIT").
Status resolve_config(const cc_config_t* config, const settings::Getenv& getenv,
                      ResolvedConfig* out);

}  // namespace cc::launch
