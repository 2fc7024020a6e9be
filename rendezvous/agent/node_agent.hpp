// cc-run's node agent: a Unix socket in a private folder that the ranks of
// this node connect to (cc-run gives them its path in CC_AGENT_SOCKET), and
// one connection to cc's rendezvous server for all of them (agent_loop.hpp,
// agent_core.hpp). Runs on the caller's io_context.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <asio/io_context.hpp>

#include "common/status.hpp"
#include "rendezvous/agent/agent_core.hpp"
#include "rendezvous/tls/context.hpp"

namespace cc::rv::agent {

struct NodeAgentOptions {
  AgentOptions agent;
  std::string server_host;  // the rendezvous server (MASTER_ADDR)
  int server_port = 0;
  // Connecting to the server, retried while it is not there yet (node 0's
  // cc-run may start later).
  std::chrono::milliseconds connect_timeout{30000};
  // Not null: the connection to the server speaks TLS (the ranks' Unix
  // socket stays clear: only this user's processes reach it).
  std::shared_ptr<tls::ClientContext> tls;
  // Not empty: the server is elected (agent.failover_timeout and
  // agent.elected_by set too); where it is now, asked again after it is
  // lost (agent_loop.hpp, UpstreamTarget::locate).
  std::function<Status(std::chrono::steady_clock::time_point deadline, std::string* host,
                       int* port)>
      locate;
};

class NodeAgent {
 public:
  // Listens on a fresh Unix socket (in a folder only this user may enter)
  // and starts connecting to the server. Errors: CC_ERR_SYSTEM naming what
  // failed.
  static Status start(asio::io_context& io, const NodeAgentOptions& options,
                      std::unique_ptr<NodeAgent>* out);
  virtual ~NodeAgent() = default;  // closes everything and removes the socket
  // The Unix socket the node's ranks connect to (CC_AGENT_SOCKET).
  virtual const std::string& socket_path() const = 0;
  // A process cc-run started ended (`group`: its process group), as text.
  virtual void process_exited(pid_t group, const std::string& words) = 0;
  // Ranks connected now.
  virtual size_t rank_count() const = 0;
};

}  // namespace cc::rv::agent
