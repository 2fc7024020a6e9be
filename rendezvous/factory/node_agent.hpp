// cc-run's node agent for an etcd cluster (the agent of cc's own server is
// rendezvous/agent's): the etcd backend's (rendezvous/etcd/node_agent*),
// made through its plugin, so cc-run holds no HTTP client of its own.
#pragma once

#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/factory/connect.hpp"
#include "rendezvous/node_agent_handle.hpp"

namespace cc::rv::factory {

// For an etcd address (address.server() is empty): the agent, with the
// job, deadlines, heartbeat window (the node lease's TTL) and CC_ETCD_*
// settings of `options`, listening on a fresh Unix socket. Errors: those of
// the settings (CC_ERR_INVALID_ARGUMENT), of loading the plugin and of
// reaching etcd (CC_ERR_RENDEZVOUS, naming it); CC_ERR_INVALID_USAGE for an
// address of cc's own server.
Status start_etcd_node_agent(const Address& address, const Options& options,
                             const std::string& host, uint32_t pid,
                             std::unique_ptr<NodeAgentHandle>* out);

}  // namespace cc::rv::factory
