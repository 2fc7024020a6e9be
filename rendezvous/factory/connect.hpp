// The one place that connects to a rendezvous: from a parsed address
// (address.hpp) and the options, a client of cc's server. A host or
// tcp://host:port names the server; etcd:// and etcds:// name an etcd
// cluster whose election says where the server is, or makes this process
// host it (elected.hpp; etcd is reached through the plugin libcc-etcd.so,
// loaded on first use). Callers hold the interface they need:
// cc_store_connect a Store, a communicator a Client (store and membership).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/settings.hpp"
#include "common/status.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/store.hpp"
#include "rendezvous/tls/context.hpp"

namespace cc::rv::factory {

struct Options {
  std::string job_id = "default";  // empty: no job (a status query of cc's server)
  std::string token;               // cc's server's shared token; empty = none
  std::string client = "cc";       // who connects, as cc's server logs it
  // Reaching the rendezvous (retrying while nobody answers yet) and
  // authenticating.
  std::chrono::milliseconds connect_timeout{30000};
  // A request that does not wait by design (set, add, a leave, ...).
  std::chrono::milliseconds request_timeout{30000};
  // With an etcd address: the lease of a leader this process elects, which
  // is how long a leader that vanished keeps the job before another takes
  // over.
  std::chrono::milliseconds lease{5000};
  // The Unix socket of cc-run's node agent (CC_AGENT_SOCKET): a client of
  // cc's server is carried by it (rendezvous/agent). Empty: none.
  std::string agent_socket;
  // Where the CC_ETCD_* settings come from (auth file, CA, client
  // certificate, key prefix); null: the process's environment.
  settings::Getenv getenv;
  // TLS to cc's server (ClientFiles.on(): TLS on); unset: the CC_TLS_*
  // settings from getenv.
  std::optional<tls::ClientFiles> tls;
  // The TLS of a server this process hosts when elected; unset: the CC_TLS_*
  // settings from getenv.
  std::optional<tls::ServerFiles> tls_server;
};

// A job's store. Errors: those of parsing the settings (CC_ERR_INVALID_ARGUMENT),
// of reaching the rendezvous (CC_ERR_RENDEZVOUS, CC_ERR_TIMEOUT naming it and
// the cause), of authenticating (CC_ERR_AUTH).
Status connect_store(const Address& address, const Options& options, std::unique_ptr<Store>* out);

// A rank's connection: the store and the membership, as a communicator holds
// it. Errors as connect_store.
//
// A rank started by a node agent reaches the server through it (a local
// Unix socket) while `address` still names the real rendezvous.
Status connect_client(const Address& address, const Options& options, std::unique_ptr<Client>* out);

}  // namespace cc::rv::factory
