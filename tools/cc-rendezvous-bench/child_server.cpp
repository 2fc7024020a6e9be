#include "tools/cc-rendezvous-bench/child_server.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "rendezvous/server.hpp"
#include "rendezvous/tls/env.hpp"

namespace cc::tools::rendezvous_bench {

ChildServer fork_server() {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, nullptr);
    cc::rv::ServerOptions o;
    o.bind_addr = "127.0.0.1";
    // Ranks behind agents count as connections: the full-size agents run
    // holds 131,072 ranks and 16,384 agents.
    o.max_connections = 200000;
    if (!cc::rv::tls::server_context_from(cc::settings::process_env(), &o.tls).ok()) _exit(1);
    std::unique_ptr<cc::rv::Server> server;
    if (!cc::rv::Server::start(o, &server).ok()) _exit(1);
    const int p = server->port();
    if (write(fds[1], &p, sizeof p) != sizeof p) _exit(1);
    close(fds[1]);
    int sig = 0;
    sigwait(&term, &sig);
    server->stop();
    _exit(0);
  }
  close(fds[1]);
  ChildServer c;
  c.pid = pid;
  if (pid < 0 || read(fds[0], &c.port, sizeof c.port) != sizeof c.port) {
    if (pid > 0) waitpid(pid, nullptr, 0);
    c.pid = -1;
  }
  close(fds[0]);
  return c;
}

std::chrono::milliseconds stop_server(const ChildServer& server, std::chrono::milliseconds grace) {
  using Clock = std::chrono::steady_clock;
  const auto t = Clock::now();
  kill(server.pid, SIGTERM);
  int status = 0;
  while (waitpid(server.pid, &status, WNOHANG) == 0) {
    if (Clock::now() - t > grace) {
      kill(server.pid, SIGKILL);
      waitpid(server.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

}  // namespace cc::tools::rendezvous_bench
