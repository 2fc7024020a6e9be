#include "rendezvous/factory/connect.hpp"

#include <utility>

#include "rendezvous/etcd/connect.hpp"
#include "rendezvous/factory/etcd_options.hpp"
#include "rendezvous/frame_client.hpp"

namespace cc::rv::factory {

Status connect_client(const Address& address, const Options& options,
                      std::unique_ptr<Client>* out) {
  if (const std::optional<ServerAt>& server = address.server()) {
    FrameClientOptions o;
    o.addr = server->host;
    o.port = server->port;
    o.job_id = options.job_id;
    o.token = options.token;
    o.client = options.client;
    o.connect_timeout = options.connect_timeout;
    o.request_timeout = options.request_timeout;
    o.agent_socket = options.agent_socket;
    return connect_frame_client(o, out);
  }
  etcd::BackendOptions o;
  if (Status s = etcd_options(address, options, &o); !s.ok()) return s;
  return etcd::connect_backend(o, out);
}

Status connect_store(const Address& address, const Options& options, std::unique_ptr<Store>* out) {
  std::unique_ptr<Client> client;
  if (Status s = connect_client(address, options, &client); !s.ok()) return s;
  *out = std::move(client);
  return Status::success();
}

}  // namespace cc::rv::factory
