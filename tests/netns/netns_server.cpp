// A rendezvous server for the namespace tests: the library's Server with a
// heartbeat deadline, on the address and port given, until SIGTERM.
//   netns_server --bind ADDR --port P [--heartbeat-timeout-ms N]
// Prints "listening PORT" once it accepts connections.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "server.hpp"

int main(int argc, char** argv) {
  cc::rv::ServerOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--bind") options.bind_addr = argv[i + 1];
    else if (k == "--port") options.port = std::atoi(argv[i + 1]);
    else if (k == "--heartbeat-timeout-ms") options.heartbeat_timeout = std::chrono::milliseconds(std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "netns_server: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before the io thread starts

  std::unique_ptr<cc::rv::Server> server;
  if (cc::Status s = cc::rv::Server::start(options, &server); !s.ok()) {
    std::fprintf(stderr, "netns_server: %s\n", s.message.c_str());
    return 1;
  }
  std::printf("listening %d\n", server->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server->stop();
  return 0;
}
