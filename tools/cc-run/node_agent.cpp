#include "tools/cc-run/node_agent.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstring>

#include <chrono>
#include <optional>

#include "common/return_if_error.hpp"
#include "lib/launch/host_name.hpp"
#include "rendezvous/factory/elected.hpp"
#include "rendezvous/tls/env.hpp"

namespace cc::tools::run {

namespace {

// How long an agent follows an elected server's election after losing it,
// past the heartbeat window: a cc-rendezvous daemon's lease (5 s unless
// --lease says otherwise), the next daemon's start and the agent's own
// look-up.
constexpr std::chrono::milliseconds kElectionAllowance{7000};

}  // namespace

std::string exit_words(int status) {
  if (WIFSIGNALED(status)) {
    std::string name = ::strsignal(WTERMSIG(status));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return "exited with signal " + std::to_string(WTERMSIG(status)) + " (" + name + ")" +
           (WCOREDUMP(status) ? ", core dumped" : "");
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

cc::Status start_node_agent(const Options& o, const cc::launch::ResolvedConfig& config,
                            asio::io_context& io, const std::string& addr, int port,
                            const std::string& job_id,
                            std::unique_ptr<cc::rv::agent::NodeAgent>* out,
                            std::shared_ptr<cc::rv::factory::ElectedServer>* elected) {
  if (!o.agent) return cc::Status::success();
  const auto connect_timeout =
      std::chrono::milliseconds(o.timeout_ms > 0 ? o.timeout_ms : config.timeout_ms);
  std::string host;
  int server_port = 0;
  if (const std::optional<cc::rv::factory::ServerAt>& server = o.rendezvous.server()) {
    host = o.master_addr.empty() ? addr : server->host;
    server_port = o.rendezvous.needs_port() ? port : server->port;
  } else {
    // An etcd cluster: the agent is a candidate to host the job's server,
    // and reaches whoever leads.
    cc::rv::factory::Options f;
    f.job_id = job_id;
    f.token = config.token;
    f.connect_timeout = connect_timeout;
    CC_RETURN_IF_ERROR(cc::rv::factory::ElectedServer::open(o.rendezvous, f, elected));
    CC_RETURN_IF_ERROR((*elected)->locate(std::chrono::steady_clock::now() + connect_timeout, &host,
                                          &server_port));
  }
  cc::rv::agent::NodeAgentOptions a;
  a.agent.job_id = job_id;
  a.agent.token = config.token;
  a.agent.host = cc::launch::host_name();
  a.agent.pid = static_cast<uint32_t>(::getpid());
  a.agent.upstream = cc::rv::factory::ServerAt{host, server_port}.text();
  a.agent.heartbeat_interval = std::chrono::milliseconds(config.heartbeat_ms);
  a.agent.heartbeat_window = std::chrono::milliseconds(static_cast<int64_t>(config.heartbeat_ms) *
                                                       config.heartbeat_misses);
  a.server_host = host;
  a.server_port = server_port;
  a.connect_timeout = connect_timeout;
  if (*elected) {
    // The agent follows the election to the next leader when it loses one.
    a.agent.elected_by = o.rendezvous.text();
    a.agent.failover_timeout = a.agent.heartbeat_window + kElectionAllowance;
    a.locate = [found = *elected](std::chrono::steady_clock::time_point deadline,
                                  std::string* h, int* p) { return found->locate(deadline, h, p); };
  }
  // TLS to the server when CC_TLS_CA is set, as the ranks' own would be.
  const cc::rv::tls::ClientFiles tls_files =
      cc::rv::tls::client_files_from(cc::settings::process_env());
  if (tls_files.on()) CC_RETURN_IF_ERROR(cc::rv::tls::ClientContext::open(tls_files, &a.tls));
  std::unique_ptr<cc::rv::agent::NodeAgent> agent;
  CC_RETURN_IF_ERROR(cc::rv::agent::NodeAgent::start(io, a, &agent));
  *out = std::move(agent);
  return cc::Status::success();
}

}  // namespace cc::tools::run
