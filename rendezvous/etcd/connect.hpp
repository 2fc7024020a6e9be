// Connecting to etcd from libcc, through the plugin (plugin.hpp): loaded once,
// on the first etcd address, from the folder of the library or program that
// holds this code, else by the dynamic loader's search path
// (LD_LIBRARY_PATH, the run path). Kept loaded for the life of the process.
#pragma once

#include <memory>

#include "common/status.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/etcd/backend.hpp"
#include "rendezvous/node_agent_handle.hpp"

namespace cc::rv::etcd {

// Backend::connect through the plugin. A plugin that cannot be loaded, or
// comes from another version of cc, is CC_ERR_RENDEZVOUS with words naming
// the file, the loader's reason and the fix.
Status connect_backend(const BackendOptions& options, std::unique_ptr<cc::rv::Client>* out);
// cc-run's node agent on etcd (node_agent_server.hpp), through the plugin.
Status start_node_agent(const NodeAgentStart& options, std::unique_ptr<NodeAgentHandle>* out);

}  // namespace cc::rv::etcd
