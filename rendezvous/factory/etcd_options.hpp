// What the etcd election is given for an etcd address: the endpoints, the
// deadlines and the CC_ETCD_* settings (auth file, CA, client certificate,
// key prefix), checked here so that a wrong one fails before any wait. Part
// of the factory (connect.hpp): nothing else builds them.
#pragma once

#include "common/status.hpp"
#include "rendezvous/etcd/election.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/factory/connect.hpp"

namespace cc::rv::factory {

// Errors: CC_ERR_INVALID_ARGUMENT naming the setting (an empty key prefix, a
// CA or client certificate with a plain-HTTP address) or the address.
Status etcd_options(const Address& address, const Options& options, etcd::ElectionOptions* out);

}  // namespace cc::rv::factory
