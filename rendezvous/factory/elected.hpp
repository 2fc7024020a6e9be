// cc's server for an etcd address: where the election put it, or here.
// Clients ask locate() where the server is now: the leader of the
// cc-rendezvous daemons started with --etcd, else the job's own leader. When
// neither leads, this process campaigns for the job and, when it wins,
// hosts cc's server itself (its store kept in etcd, fenced by its lease)
// and publishes the address; the job's processes that lose find it there.
// One per (etcd cluster, key prefix, job) in a process, shared by its
// clients; the last client to go takes the hosted server with it and
// resigns, so the next candidate takes over at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/election.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/factory/connect.hpp"

namespace cc::rv::factory {

// The election of an etcd address (the CC_ETCD_* settings of `options`,
// reached through the plugin by its connect deadline): what the
// cc-rendezvous daemons campaign in. Errors: those of the settings, the
// plugin and etcd.
Status open_election(const Address& address, const Options& options,
                     std::unique_ptr<Election>* out);

// This host's address on the route to the cluster's first endpoint: what a
// leader publishes, since the job's other processes reach the same etcd.
// "127.0.0.1" when there is no route.
std::string address_toward(const Address& etcd);

class ElectedServer {
 public:
  // The one of this process for the address's cluster and the job, made on
  // first use (the plugin loaded, etcd reached by the deadline). Errors:
  // those of the settings, the plugin and etcd.
  static Status open(const Address& address, const Options& options,
                     std::shared_ptr<ElectedServer>* out);
  virtual ~ElectedServer() = default;
  // Where cc's server for the job is now, by the deadline: campaigns when
  // nobody leads. Errors: CC_ERR_TIMEOUT naming etcd and the job, or etcd's.
  virtual Status locate(std::chrono::steady_clock::time_point deadline, std::string* host,
                        int* port) = 0;
  // True while this process hosts the job's server.
  virtual bool hosting() const = 0;
};

}  // namespace cc::rv::factory
