// libcc-etcd.so's one exported function (see plugin.hpp).
#include "rendezvous/etcd/plugin.hpp"

#include "rendezvous/etcd/node_agent_server.hpp"

#include <exception>
#include <string>

#include "cc/cc.h"

namespace cc::rv::etcd {
namespace {

Status plugin_connect(const BackendOptions& options, std::unique_ptr<cc::rv::Client>* out) {
  try {
    std::unique_ptr<Backend> backend;
    Status s = Backend::connect(options, &backend);
    if (s.ok()) *out = std::move(backend);
    return s;
  } catch (const std::exception& e) {
    return make_status(CC_ERR_INTERNAL, std::string("etcd backend: ") + e.what());
  }
}

Status plugin_start_node_agent(const NodeAgentStart& options,
                               std::unique_ptr<NodeAgentHandle>* out) {
  try {
    node::AgentOptions o;
    o.backend = options.backend;
    o.host = options.host;
    o.pid = options.pid;
    std::unique_ptr<node::AgentServer> server;
    Status s = node::AgentServer::start(o, &server);
    if (s.ok()) *out = std::move(server);
    return s;
  } catch (const std::exception& e) {
    return make_status(CC_ERR_INTERNAL, std::string("etcd node agent: ") + e.what());
  }
}

constexpr PluginApi kApi{CC_VERSION_STRING, &plugin_connect, &plugin_start_node_agent};

}  // namespace
}  // namespace cc::rv::etcd

extern "C" __attribute__((visibility("default"))) const cc::rv::etcd::PluginApi*
cc_etcd_plugin_v1() {
  return &cc::rv::etcd::kApi;
}
