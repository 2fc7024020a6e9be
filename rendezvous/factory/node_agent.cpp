#include "rendezvous/factory/node_agent.hpp"

#include "rendezvous/etcd/connect.hpp"
#include "rendezvous/factory/etcd_options.hpp"

namespace cc::rv::factory {

Status start_etcd_node_agent(const Address& address, const Options& options,
                             const std::string& host, uint32_t pid,
                             std::unique_ptr<NodeAgentHandle>* out) {
  if (address.server())
    return make_status(CC_ERR_INVALID_USAGE, address.where() +
                                                 " is cc's own server: its node agent is "
                                                 "rendezvous/agent's, not etcd's");
  etcd::NodeAgentStart start;
  if (Status s = etcd_options(address, options, &start.backend); !s.ok()) return s;
  start.host = host;
  start.pid = pid;
  return etcd::start_node_agent(start, out);
}

}  // namespace cc::rv::factory
