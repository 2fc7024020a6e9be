// cc-run's node agent: a Unix socket in a private folder that the ranks of
// this node connect to (cc-run gives them its path in CC_AGENT_SOCKET), and
// one connection to cc's rendezvous server for all of them (agent_loop.hpp,
// agent_core.hpp). Runs on the caller's io_context.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include <asio/io_context.hpp>

#include "common/status.hpp"
#include "rendezvous/agent/agent_core.hpp"
#include "rendezvous/node_agent_handle.hpp"

namespace cc::rv::agent {

struct NodeAgentOptions {
  AgentOptions agent;
  std::string server_host;  // the rendezvous server (MASTER_ADDR)
  int server_port = 0;
  // Connecting to the server, retried while it is not there yet (node 0's
  // cc-run may start later).
  std::chrono::milliseconds connect_timeout{30000};
};

class NodeAgent : public NodeAgentHandle {
 public:
  // Listens on a fresh Unix socket (in a folder only this user may enter)
  // and starts connecting to the server. Errors: CC_ERR_SYSTEM naming what
  // failed.
  static Status start(asio::io_context& io, const NodeAgentOptions& options,
                      std::unique_ptr<NodeAgent>* out);
  ~NodeAgent() override = default;  // closes everything and removes the socket
};

}  // namespace cc::rv::agent
