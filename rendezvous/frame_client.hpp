// cc's own rendezvous client: its frame protocol (protocol.hpp) over one
// persistent connection to cc's server (server.hpp), serving the store and
// the membership (client.hpp) on that one connection. Calls are serialised
// by an internal mutex, so one client may be shared by threads; peer events
// the server pushes are queued (at most ClientInbox::kMaxEvents, past which
// the connection is given up with a message) and taken with next_event().
//
// A library or program reaches it through rendezvous/factory, which makes
// it for a host (with its port apart) or a tcp://host:port address; tests
// and cc's own server tools may connect directly.
//
// Failover: given a locator, the client asks it where the server is, and
// asks again when the connection is lost without a clean close (end of
// stream, reset, a read or write error, or the server saying it stops). It
// then dials the server found, says Hello with the same session id,
// authenticates, resumes every communicator membership it held (protocol.hpp,
// Resume) and sends again every request still awaiting its answer, with the
// same request id; peer events already queued stay queued. Calls made
// meanwhile wait for it (each within its own deadline). When no server takes
// it within failover_timeout, the connection is lost as it is without a
// locator: every call fails, and the event reader gets server_stopping with
// the message why.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/tls/context.hpp"

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
  // Through a node agent that follows an elected server (an etcd address):
  // a lost connection to the agent is met as a lost server is with a
  // locator, but the client connects to the agent again, which answers its
  // hello once it reached the next server (or refuses it, saying why not:
  // the client then gives up at once), and resumes through it.
  bool agent_follows = false;
  // Not empty: where the rendezvous server is now, asked before the first
  // connect (addr and port are then unused) and after every loss of the
  // connection; it fills host and port, or says why not (it is asked again,
  // with backoff, until the deadline). Not used through a node agent, which
  // follows the server itself.
  using Locate = std::function<Status(std::chrono::steady_clock::time_point deadline,
                                      std::string* host, int* port)>;
  Locate locate;
  // How long the client looks for the next server after losing one.
  std::chrono::milliseconds failover_timeout{30000};
  // How messages name the rendezvous when it is not addr:port (the etcd
  // address the server was located by).
  std::string name;
  // Not null: TLS to the server (tls/context.hpp), checking that its
  // certificate names the host dialled. Not used toward a node agent.
  std::shared_ptr<tls::ClientContext> tls;
};

// Connects over TCP with retries and backoff until connect_timeout, then
// says Hello and authenticates. Errors: CC_ERR_INVALID_ARGUMENT (no address,
// a port outside 1..65535, a job id over its limit), CC_ERR_RENDEZVOUS
// (naming addr:port and the cause), CC_ERR_AUTH, CC_ERR_TIMEOUT.
Status connect_frame_client(const FrameClientOptions& options, std::unique_ptr<Client>* out);

}  // namespace cc::rv
