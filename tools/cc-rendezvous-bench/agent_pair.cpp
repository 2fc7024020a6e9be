#include "tools/cc-rendezvous-bench/agent_pair.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <asio/io_context.hpp>

#include "rendezvous/agent/node_agent.hpp"
#include "rendezvous/server.hpp"
#include "tools/cc-rendezvous-bench/start_pair.hpp"

namespace cc::tools::rendezvous_bench {
namespace {

using std::chrono::milliseconds;

// A node agent for one job, as cc-run runs one, on its own io thread.
class AgentForJob {
 public:
  bool start(const std::string& job, int server_port) {
    cc::rv::agent::NodeAgentOptions a;
    a.agent.job_id = job;
    a.agent.host = "pair-a";
    a.agent.pid = static_cast<uint32_t>(::getpid());
    a.agent.upstream = "127.0.0.1:" + std::to_string(server_port);
    a.server_host = "127.0.0.1";
    a.server_port = server_port;
    const cc::Status s = cc::rv::agent::NodeAgent::start(io_, a, &agent_);
    if (s.ok()) thread_ = std::thread([this] { io_.run(); });
    if (!s.ok()) std::printf("the node agent did not start: %s\n", s.message.c_str());
    return s.ok();
  }
  const std::string& socket() const { return agent_->socket_path(); }
  ~AgentForJob() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
    agent_.reset();  // cc's server's agent's sockets go on this thread, its io stopped
  }

 private:
  asio::io_context io_;
  std::unique_ptr<cc::rv::agent::NodeAgent> agent_;
  std::thread thread_;
};

}  // namespace

bool run_agent_pair(int rounds) {
  std::unique_ptr<cc::rv::Server> server;
  cc::rv::ServerOptions options;
  options.bind_addr = "127.0.0.1";
  if (cc::Status s = cc::rv::Server::start(options, &server); !s.ok()) {
    std::printf("the server did not start: %s\n", s.message.c_str());
    return false;
  }
  const int port = server->port();
  // Each run's jobs are its own (an etcd cluster keeps a job's keys).
  const std::string run = std::to_string(::getpid()) + "-";
  std::vector<double> direct, through;
  // Alternate, so a slow spell of the machine hits both alike.
  for (int i = 0; i < rounds; ++i) {
    PairSetup straight;
    straight.one_host = true;
    straight.server_port = port;
    straight.job_prefix = "direct-" + run;
    double ms = 0;
    if (!start_two(straight, i, &ms)) return false;
    direct.push_back(ms);

    AgentForJob agent;
    if (!agent.start("agent-" + run + std::to_string(i), port)) return false;
    PairSetup via = straight;
    via.job_prefix = "agent-" + run;
    via.agent_socket = agent.socket();
    if (!start_two(via, i, &ms)) return false;
    through.push_back(ms);
  }
  const double m_direct = median(direct), m_agent = median(through);
  std::printf(
      "start of 2 ranks of one host against a running cc server, median of %d: %.2f ms straight "
      "to it, %.2f ms through a node agent: the agent adds %.2f ms\n",
      rounds, m_direct, m_agent, m_agent - m_direct);
  server->stop();
  return true;
}

}  // namespace cc::tools::rendezvous_bench
