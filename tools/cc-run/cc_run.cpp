// cc-run: starts N local ranks of a program with the launch environment cc
// reads, hosts the job's rendezvous server on node 0, prefixes every output
// line with its rank, forwards SIGINT/SIGTERM, and when one rank fails stops
// the others and exits with that rank's status (with --max-restarts: starts
// the failed rank again and lets the others run on). Its rooms: the options
// (run_options), starting a rank (rank_process), relaying output
// (output_relay), signals (signals), supervision and restarts (supervisor),
// the server (hosted_server), the node agent (node_agent).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/settings.hpp"
#include "lib/launch/config.hpp"
#include "tools/cc-run/hosted_server.hpp"
#include "tools/cc-run/node_agent.hpp"
#include "tools/cc-run/rank_process.hpp"
#include "tools/cc-run/run_options.hpp"
#include "tools/cc-run/supervisor.hpp"

namespace {

std::string fresh_job_id() {
  char host[64] = {};
  ::gethostname(host, sizeof(host) - 1);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::string("cc-run-") + host + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now).count());
}

// Two pipes per rank, plus the server's connections: raise the soft limit
// toward the hard one when the default would run out.
void raise_fd_limit(rlim_t needed) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= needed) return;
  lim.rlim_cur = std::min(needed + 1024, lim.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cc::tools::run;
  const Options o = parse_options(argc, argv);

  cc::launch::ResolvedConfig cfg;
  if (cc::Status s = cc::launch::resolve_config(nullptr, cc::settings::process_env(), &cfg);
      !s.ok()) {
    std::fprintf(stderr, "cc-run: %s\n", s.message.c_str());
    return kUsageError;
  }
  std::string job_id = o.job_id;
  if (job_id.empty()) {
    const char* from_env = std::getenv("CC_JOB_ID");
    job_id = from_env != nullptr && *from_env != '\0' ? from_env
             : o.nnodes == 1                          ? fresh_job_id()
                                                      : "default";
  }

  if (o.share_gpu) {
    const char* device = std::getenv("CC_DEVICE");
    std::fprintf(stderr,
                 "cc-run: --share-gpu: the %d rank(s) of this node share GPU %s, each its own host "
                 "to NCCL; NCCL goes over sockets and cc's kernels are off, so timings say "
                 "nothing about a real machine\n",
                 o.nproc, device != nullptr ? device : "0");
  }
  const std::string addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
  std::unique_ptr<cc::rv::Server> server;
  std::string agent_socket;
  int port = o.master_port;
  const Restart restart = [&](const Rank& r, int n, StartedRank* out) {
    const int local = r.rank - o.node_rank * o.nproc;
    return start_rank(o.command, rank_environment(o, local, addr, port, job_id, agent_socket, n),
                      false, out);
  };
  Supervisor supervisor(o, restart);  // watches the signals from here on
  // After the supervisor, so that it goes first on every return: it runs on
  // the supervisor's io_context.
  std::shared_ptr<cc::rv::factory::ElectedServer> elected;  // outlives the agent
  std::unique_ptr<cc::rv::agent::NodeAgent> agent;
  raise_fd_limit(static_cast<rlim_t>(o.nproc) * 3 + 256);

  if (cc::Status s = start_hosted_server(o, cfg, &server); !s.ok()) {
    std::fprintf(stderr, "cc-run: cannot start the rendezvous server: %s\n", s.message.c_str());
    return 1;
  }
  if (server) port = server->port();
  if (cc::Status s = start_node_agent(o, cfg, supervisor.io(), addr, port, job_id, &agent,
                                          &elected);
      !s.ok()) {
    std::fprintf(stderr, "cc-run: cannot start the node agent: %s\n", s.message.c_str());
    return 1;
  }
  if (agent) {
    agent_socket = agent->socket_path();
    supervisor.on_exit([&agent](const Rank& r, int status) {
      agent->process_exited(r.pid, exit_words(status));
    });
  }

  const bool stdin_to_rank0 = ::isatty(0) == 0;
  for (int local = 0; local < o.nproc; ++local) {
    const int rank = o.node_rank * o.nproc + local;
    StartedRank started;
    const int err =
        start_rank(o.command, rank_environment(o, local, addr, port, job_id, agent_socket),
                   stdin_to_rank0 && local == 0, &started);
    if (err == 0) {
      supervisor.add(rank, started);
      continue;
    }
    supervisor.kill_all();
    if (program_not_found(err)) {
      const std::string& name = o.command[0];
      std::fprintf(stderr,
                   "cc-run: cannot find the program '%s': %s. Check the name, "
                   "or give its path\n",
                   name.c_str(),
                   name.find('/') != std::string::npos ? "no such executable file"
                                                       : "it is not an executable in PATH");
      return 127;
    }
    std::fprintf(stderr, "cc-run: cannot start rank %d: %s%s; stopping the others\n", rank,
                 std::strerror(err),
                 err == EMFILE ? " (raise the open-file limit: ulimit -n)" : "");
    return 1;
  }

  const int code = supervisor.run();
  agent.reset();  // after the ranks: its connection ends once they are gone
  if (server) stop_hosted_server(*server, o, job_id);
  return code;
}
