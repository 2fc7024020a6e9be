// What cc-run holds of its node's agent, whichever the rendezvous: cc's
// server's (rendezvous/agent/node_agent.hpp) or etcd's (made by
// rendezvous/factory/node_agent.hpp, in the etcd plugin). Destroying it
// closes the ranks' connections and removes the socket.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace cc::rv {

class NodeAgentHandle {
 public:
  virtual ~NodeAgentHandle() = default;
  // The Unix socket the node's ranks connect to (CC_AGENT_SOCKET).
  virtual const std::string& socket_path() const = 0;
  // A process cc-run started ended (`group`: its process group), in words.
  virtual void process_exited(pid_t group, const std::string& words) = 0;
  // Ranks connected now.
  virtual size_t rank_count() const = 0;
};

}  // namespace cc::rv
