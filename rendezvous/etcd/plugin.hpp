// The etcd backend as a plugin: libcc-etcd.so holds the backend with its HTTP
// client (cpp-httplib, OpenSSL, zlib, brotli) and exports one function,
// looked up by name, so that libcc itself loads none of those libraries
// unless a job's address is etcd:// or etcds://. The plugin and libcc come
// from the same build: the table carries cc's version, and the loader refuses
// a plugin of another.
#pragma once

#include <memory>

#include "common/status.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/etcd/backend.hpp"
#include "rendezvous/node_agent_handle.hpp"

namespace cc::rv::etcd {

struct PluginApi {
  const char* version;  // CC_VERSION_STRING of the build the plugin came from
  // Backend::connect; never throws.
  Status (*connect)(const BackendOptions& options, std::unique_ptr<cc::rv::Client>* out);
  // node::AgentServer::start (cc-run's node agent on etcd); never throws.
  Status (*start_node_agent)(const NodeAgentStart& options,
                             std::unique_ptr<NodeAgentHandle>* out);
};

// The file name the loader looks for and the symbol it exports.
inline constexpr const char* kPluginFile = "libcc-etcd.so";
inline constexpr const char* kPluginSymbol = "cc_etcd_plugin_v1";

}  // namespace cc::rv::etcd
