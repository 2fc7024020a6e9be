// cc's rendezvous server in a child process on 127.0.0.1, for runs whose
// connections do not fit one process's open-file limit and for the abuse
// run, which measures how the server stops.
#pragma once

#include <sys/types.h>

#include <chrono>

namespace cc::tools::rendezvous_bench {

struct ChildServer {
  pid_t pid = -1;  // -1: it did not start
  int port = 0;
};

// Forks the server and waits for the port it listens on. It stops on SIGTERM
// as cc-rendezvous does: sigwait, then Server::stop.
ChildServer fork_server();

// SIGTERM, then waits up to `grace` for the child to end, SIGKILL after
// that. Returns how long it took to end.
std::chrono::milliseconds stop_server(const ChildServer& server, std::chrono::milliseconds grace);

}  // namespace cc::tools::rendezvous_bench
