// The one factory of rendezvous backends: from a parsed address (address.hpp)
// and the options, the backend that serves it. A host or tcp://host:port is
// cc's own server, reached by its frame client (rendezvous/frame_client.hpp);
// etcd:// and etcds:// are an etcd cluster, reached by the etcd backend
// (rendezvous/etcd/backend.hpp) in the plugin libcc-etcd.so, loaded on first
// use (rendezvous/etcd/connect.hpp). Callers hold the interface they need:
// cc_store_connect a Store, a communicator a Client (store and membership).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/settings.hpp"
#include "common/status.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/store.hpp"

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
  // A connection that will join a communicator: the heartbeat window it will
  // ask for. On etcd that is its membership lease's TTL, taken at connect
  // (which proves etcd reachable), so asking makes no second lease. Zero: it
  // will join nothing (a store, a status query).
  std::chrono::milliseconds heartbeat_window{0};
  // The Unix socket of cc-run's node agent (CC_AGENT_SOCKET): a client of
  // cc's server is carried by it (rendezvous/agent). Empty: none.
  std::string agent_socket;
  // Where the CC_ETCD_* settings come from (auth file, CA, client
  // certificate, key prefix); null: the process's environment.
  settings::Getenv getenv;
};

// A job's store. Errors: those of parsing the settings (CC_ERR_INVALID_ARGUMENT),
// of reaching the rendezvous (CC_ERR_RENDEZVOUS, CC_ERR_TIMEOUT naming it and
// the cause), of authenticating (CC_ERR_AUTH).
Status connect_store(const Address& address, const Options& options, std::unique_ptr<Store>* out);

// A rank's connection: the store and the membership, as a communicator holds
// it. Errors as connect_store.
//
// Every route to a backend is chosen here, once. A rank started by a node
// agent would reach the membership through it (a local Unix socket, cc's
// frame protocol) while `address` still names the real rendezvous: that is
// a route taken here, and a second dial beside the frame client's TCP one.
Status connect_client(const Address& address, const Options& options, std::unique_ptr<Client>* out);

}  // namespace cc::rv::factory
