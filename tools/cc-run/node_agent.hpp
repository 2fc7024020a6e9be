// cc-run as its node's agent (rendezvous/agent/node_agent.hpp): the ranks it
// starts reach the rendezvous through it, and it tells the rendezvous the
// moment one of them exits.
#pragma once

#include <memory>
#include <string>

#include <asio/io_context.hpp>

#include "common/status.hpp"
#include "lib/launch/config.hpp"
#include "rendezvous/agent/node_agent.hpp"
#include "rendezvous/factory/elected.hpp"
#include "tools/cc-run/run_options.hpp"

namespace cc::tools::run {

// How a rank's process ended, for the others: "exited with status 3",
// "exited with signal 9 (killed)".
std::string exit_words(int status);

// Starts the agent on `io` for the rendezvous server the ranks are given
// (addr, and port where the address takes it apart), or for the server an
// etcd cluster's election names, unless --no-agent asks the ranks to go
// directly; *out stays empty then. With an etcd address *elected is this
// node's candidacy to host the job's server: hold it as long as the agent.
cc::Status start_node_agent(const Options& o, const cc::launch::ResolvedConfig& config,
                            asio::io_context& io, const std::string& addr, int port,
                            const std::string& job_id,
                            std::unique_ptr<cc::rv::agent::NodeAgent>* out,
                            std::shared_ptr<cc::rv::factory::ElectedServer>* elected);

}  // namespace cc::tools::run
