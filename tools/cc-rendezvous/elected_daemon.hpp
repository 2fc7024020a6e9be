// cc-rendezvous --etcd: a daemon that serves only while etcd's election
// says it leads. It stands by, campaigning every quarter of the lease; when
// it wins it reads the store back from etcd, serves on its port and
// publishes --advertise (or this host's address toward etcd); when it loses
// the lease (etcd unreachable, a pause past the lease) it drops every
// connection unanswered, so clients reconnect to the next leader, and
// stands by again.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/server.hpp"

namespace cc::tools::rendezvous {

struct ElectedOptions {
  std::string etcd;       // etcd://host:port[,...] or etcds://...
  std::string advertise;  // host:port clients dial; empty: this host toward etcd, --port
  std::chrono::milliseconds lease{5000};
  std::chrono::milliseconds connect_timeout{30000};
};

class ElectedDaemon {
 public:
  // Reaches etcd (CC_ETCD_* settings for auth, TLS and the key prefix) and
  // starts campaigning. Errors: the address, the settings, etcd unreachable.
  static Status start(const ElectedOptions& options, const rv::ServerOptions& server,
                      std::unique_ptr<ElectedDaemon>* out);
  virtual ~ElectedDaemon() = default;
  // Stops serving (members are told the server stops) and resigns.
  virtual void stop() = 0;
  // The server while this daemon leads; null while it stands by.
  virtual std::shared_ptr<rv::Server> server() = 0;
  // The tokens new connections must prove, for this and later terms.
  virtual bool set_tokens(const Tokens& tokens, std::chrono::milliseconds timeout) = 0;
};

}  // namespace cc::tools::rendezvous
