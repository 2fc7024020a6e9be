// The etcd node agent (node_agent.hpp) on a Unix socket for the ranks
// cc-run starts (node_link.hpp is their side): one thread accepts, one reads
// each rank's connection. A rank's process end is told by cc-run
// (process_exited) or, when its connection ends without it, after a grace
// in words saying so.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/etcd/node_agent.hpp"
#include "rendezvous/node_agent_handle.hpp"

namespace cc::rv::etcd::node {

class AgentServer final : public NodeAgentHandle {
 public:
  // Starts the agent and listens on a fresh socket in a folder only this
  // user may enter (under $TMPDIR or /tmp).
  static Status start(const AgentOptions& options, std::unique_ptr<AgentServer>* out);
  ~AgentServer() override;  // closes the ranks' connections, then the agent
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  const std::string& socket_path() const override;
  void process_exited(pid_t group, const std::string& words) override;
  size_t rank_count() const override;

  struct Impl;

 private:
  explicit AgentServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cc::rv::etcd::node
