// A rendezvous address that names an etcd cluster (etcd://host:port,... or
// etcds://...), and what connecting to it takes from the environment: the
// auth file, the CA, a client certificate and the key prefix (CC_ETCD_*).
// Used wherever a rendezvous address is accepted: the job's environment,
// cc_comm_init and cc_store_connect.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/settings.hpp"
#include "common/status.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/etcd/backend.hpp"

namespace cc::launch {

bool is_etcd_address(const std::string& addr);

// The host of an etcd address's first endpoint ("" when it does not parse):
// where NCCL's interface choice looks for a route.
std::string etcd_first_host(const std::string& addr);

// Options for the etcd backend: the address (checked here, so a malformed
// one fails before any wait), the job and the CC_ETCD_* settings; the
// caller sets the deadlines and the membership fields.
Status etcd_options(const std::string& addr, const std::string& job_id,
                    const settings::Getenv& getenv, rv::etcd::BackendOptions* out);

// Connects through cc's etcd backend (libcc-etcd.so, loaded on first use).
Status connect_etcd(const rv::etcd::BackendOptions& options, std::unique_ptr<rv::Client>* out);

}  // namespace cc::launch
