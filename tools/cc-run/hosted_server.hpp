// The job's rendezvous server, hosted by cc-run on node 0 where the address
// names one (not an etcd cluster, which is the rendezvous itself), so that
// any rank may die, rank 0 included.
#pragma once

#include <memory>
#include <string>

#include "common/status.hpp"
#include "lib/launch/config.hpp"
#include "rendezvous/server.hpp"
#include "tools/cc-run/run_options.hpp"

namespace cc::tools::run {

// Starts the server when this node hosts one; *out stays empty when not.
cc::Status start_hosted_server(const Options& o, const cc::launch::ResolvedConfig& config,
                               std::unique_ptr<cc::rv::Server>* out);

// Stops it, once the job's members on other nodes have left (up to 30 s).
void stop_hosted_server(cc::rv::Server& server, const Options& o, const std::string& job_id);

}  // namespace cc::tools::run
