// cc_server_*: an embedded rendezvous server, the same one cc-rendezvous runs.
#include <memory>
#include <string>

#include "cc/cc.h"
#include "common/last_error.hpp"
#include "lib/launch/config.hpp"
#include "lib/launch/env.hpp"
#include "rendezvous/server.hpp"
#include "rendezvous/tls/env.hpp"

struct cc_server {
  std::unique_ptr<cc::rv::Server> server;
};

extern "C" CC_API cc_result_t cc_server_start(cc_server_t* server, const char* bind_addr, int port,
                                              const cc_config_t* config) {
  CC_API_GUARD_BEGIN
  if (server == nullptr) {
    return cc::fail(CC_ERR_INVALID_ARGUMENT,
                    "cc_server_start: server is NULL: pass the address of a cc_server_t");
  }
  *server = nullptr;
  if (port < 0 || port > 65535) {
    return cc::fail(CC_ERR_INVALID_ARGUMENT, "cc_server_start: port " + std::to_string(port) +
                                                 " is out of range 0..65535 (0 = any free port)");
  }
  if (bind_addr != nullptr && *bind_addr == '\0') {
    return cc::fail(CC_ERR_INVALID_ARGUMENT,
                    "cc_server_start: bind_addr is empty: pass NULL for 0.0.0.0 (every IPv4 "
                    "interface), \"::\" for IPv6, or one address");
  }
  cc::launch::ResolvedConfig cfg;
  if (cc::Status s = cc::launch::resolve_config(config, cc::settings::process_env(), &cfg);
      !s.ok()) {
    return cc::fail(s.code, "cc_server_start: " + s.message);
  }
  cc::rv::ServerOptions options;
  options.bind_addr = bind_addr != nullptr ? bind_addr : "0.0.0.0";
  options.port = port;
  options.token = cfg.token;
  options.job_ttl = std::chrono::milliseconds(
      cfg.job_ttl_or(static_cast<int>(cc::settings::default_int(cc::settings::Id::job_ttl_ms))));
  if (cc::Status s = cc::rv::tls::server_context_for(cfg.tls_server, &options.tls); !s.ok()) {
    return cc::fail(s.code, "cc_server_start: " + s.message);
  }
  auto handle = std::make_unique<cc_server>();
  if (cc::Status s = cc::rv::Server::start(options, &handle->server); !s.ok()) {
    return cc::fail(s.code, "cc_server_start: " + s.message);
  }
  *server = handle.release();
  return cc::succeed();
  CC_API_GUARD_END
}

extern "C" CC_API cc_result_t cc_server_port(cc_server_t server, int* port) {
  CC_API_GUARD_BEGIN
  if (server == nullptr) {
    return cc::fail(CC_ERR_INVALID_ARGUMENT,
                    "cc_server_port: server is NULL: start it with cc_server_start");
  }
  if (port == nullptr) return cc::fail(CC_ERR_INVALID_ARGUMENT, "cc_server_port: port is NULL");
  *port = server->server->port();
  return cc::succeed();
  CC_API_GUARD_END
}

extern "C" CC_API cc_result_t cc_server_stop(cc_server_t server) {
  CC_API_GUARD_BEGIN
  if (server == nullptr) return cc::succeed();
  server->server->stop();
  delete server;
  return cc::succeed();
  CC_API_GUARD_END
}
