// The election and the durable store on etcd (rendezvous/election.hpp):
// a candidate grants itself a lease and, in one transaction, puts its
// address on the scope's leader key if that key is absent. The winner keeps
// the lease alive on a thread of its own (every third of its TTL, a failed
// renewal tried again within 250 ms) and counts itself deposed once the
// lease may have ended: from the last renewal etcd confirmed, less a margin,
// so a leader that was paused (SIGSTOP, a stalled VM) finds itself deposed
// the moment it wakes, before it answers anything.
//
// Its writes (Durable) are transactions that hold only while the leader key
// is still the one it created and the scope's fence key is as its last
// write left it; each write moves the fence. So a deposed leader's write
// fails, and a copy of a write that etcd applies late (sent to a member that
// was paused) fails too, instead of landing after a newer write.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/election.hpp"
#include "rendezvous/etcd/client.hpp"

namespace cc::rv::etcd {

struct ElectionOptions {
  ClientOptions client;
  std::string prefix = "cc";
  // The leader's lease: how long a leader that vanished keeps its scope
  // (whole seconds; etcd raises it to its minimum).
  std::chrono::milliseconds lease{5000};
  // One request that does not wait by design.
  std::chrono::milliseconds request_timeout{10000};
};

// Checks the options and reaches etcd (authenticating when asked) by the
// deadline. Errors: CC_ERR_INVALID_ARGUMENT (files), CC_ERR_AUTH,
// CC_ERR_RENDEZVOUS / CC_ERR_TIMEOUT naming etcd and its endpoints.
Status open_election(const ElectionOptions& options, Deadline deadline,
                     std::unique_ptr<Election>* out);

}  // namespace cc::rv::etcd
