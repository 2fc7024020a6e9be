// --agents: a job of N nodes x R ranks through node agents, against cc's
// rendezvous server in a child process. Each node is the real agent
// (rendezvous/agent: AgentCore on an AgentLoop, with its own TCP connection
// to the server); only its ranks are simulated, in memory, speaking the
// protocol to the agent as a rank's client does. One thread drives every
// node; the server runs on its own, as it would on its own machine.
#pragma once

#include <chrono>
#include <string>

namespace cc::tools::rendezvous_bench {

struct AgentsRun {
  int nodes = 16384;
  int ranks_per_node = 8;
  int window = 1024;  // agents connecting at once
  std::chrono::milliseconds heartbeat_window{5000};
  // Not empty (etcd://...): the server is a cc-rendezvous --etcd daemon
  // elected in that cluster, and every node first asks etcd where it is.
  std::string etcd;
};

// The phases, each timed: the join; the first heartbeats reaching the
// server; one rank's death told to every rank; a node that hangs, told to
// every rank; a shrink after both; a clean leave. False when a phase failed.
bool run_agents(const AgentsRun& run);

}  // namespace cc::tools::rendezvous_bench
