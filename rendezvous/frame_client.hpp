// cc's own rendezvous client: its frame protocol (protocol.hpp) over one
// persistent connection to cc's server (server.hpp), serving the store and
// the membership (client.hpp) on that one connection. Calls are serialised
// by an internal mutex, so one client may be shared by threads; peer events
// the server pushes are queued (at most ClientInbox::kMaxEvents, past which
// the connection is given up with words) and taken with next_event().
//
// A library or program reaches it through rendezvous/factory, which makes
// it for a host (with its port apart) or a tcp://host:port address; tests
// and cc's own server tools may connect directly.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/client.hpp"

namespace cc::rv {

struct FrameClientOptions {
  std::string addr;  // IPv4, IPv6 ("::1" or "[::1]") or a host name
  int port = 0;
  std::string job_id = "default";
  std::string token;          // empty = none
  std::string client = "cc";  // free text sent in Hello
  // Total budget for connecting (retrying with backoff while refused) and the
  // handshake.
  std::chrono::milliseconds connect_timeout{30000};
  // Deadline for a request that does not wait by design (set, add, ...).
  std::chrono::milliseconds request_timeout{30000};
  // Not empty: the Unix socket of cc-run's node agent on this host, which
  // carries the connection's frames to the rendezvous at addr:port
  // (rendezvous/agent/agent_core.hpp); the client connects there instead.
  std::string agent_socket;
  // Where the server is, asked before connecting (addr and port are then
  // ignored): the elected leader of an etcd address (rendezvous/factory).
  std::function<Status(std::chrono::steady_clock::time_point deadline, std::string* host,
                       int* port)>
      locate;
  // How messages name the rendezvous when it is not addr:port (the etcd
  // address the server was located by).
  std::string name;
};

// Connects over TCP with retries and backoff until connect_timeout, then
// says Hello and authenticates. Errors: CC_ERR_INVALID_ARGUMENT (no address,
// a port outside 1..65535, a job id over its limit), CC_ERR_RENDEZVOUS
// (naming addr:port and the cause), CC_ERR_AUTH, CC_ERR_TIMEOUT.
Status connect_frame_client(const FrameClientOptions& options, std::unique_ptr<Client>* out);

}  // namespace cc::rv
