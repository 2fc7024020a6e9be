#include "rendezvous/factory/connect.hpp"

#include <algorithm>
#include <utility>

#include "rendezvous/factory/elected.hpp"
#include "rendezvous/frame_client.hpp"
#include "rendezvous/tls/env.hpp"

namespace cc::rv::factory {

Status connect_client(const Address& address, const Options& options,
                      std::unique_ptr<Client>* out) {
  FrameClientOptions o;
  o.job_id = options.job_id;
  o.token = options.token;
  o.client = options.client;
  o.connect_timeout = options.connect_timeout;
  o.request_timeout = options.request_timeout;
  o.agent_socket = options.agent_socket;
  // TLS to cc's server when a CA is given (not toward a node agent, whose
  // Unix socket stays clear; the agent's uplink has its own).
  const tls::ClientFiles tls_files =
      options.tls
          ? *options.tls
          : tls::client_files_from(options.getenv ? options.getenv : settings::process_env());
  if (tls_files.on() && options.agent_socket.empty()) {
    if (Status s = tls::ClientContext::open(tls_files, &o.tls); !s.ok()) return s;
  }
  if (const std::optional<ServerAt>& server = address.server()) {
    o.addr = server->host;
    o.port = server->port;
    return connect_frame_client(o, out);
  }
  if (!options.agent_socket.empty()) {
    // cc-run's agent finds the elected server for its ranks, and follows it
    // to the next leader; the client resumes through the agent, which says
    // within its own deadline whether it reached one.
    o.addr = address.text();
    o.agent_follows = true;
    o.failover_timeout = std::max(o.failover_timeout, options.connect_timeout);
    return connect_frame_client(o, out);
  }
  // An etcd cluster: cc's server is where its election put it (or here).
  std::shared_ptr<ElectedServer> elected;
  if (Status s = ElectedServer::open(address, options, &elected); !s.ok()) return s;
  o.name = address.text();
  o.locate = [elected](std::chrono::steady_clock::time_point deadline, std::string* host,
                       int* port) { return elected->locate(deadline, host, port); };
  return connect_frame_client(o, out);
}

Status connect_store(const Address& address, const Options& options, std::unique_ptr<Store>* out) {
  std::unique_ptr<Client> client;
  if (Status s = connect_client(address, options, &client); !s.ok()) return s;
  *out = std::move(client);
  return Status::success();
}

}  // namespace cc::rv::factory
