// A survivor's part of a recovery (cc_comm_shrink, cc_comm_regrow), without
// CUDA or NCCL: a new connection to the communicator's rendezvous, Recover
// on it, the new NCCL id made when the server asks this rank for it, and the
// generation the server decided. Also what that connection hears while the
// new NCCL communicator is made. Tested with processes as ranks
// (tests/rendezvous/recovery_member.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "lib/launch/config.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/membership.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::comm {

struct RecoverRequest {
  rv::factory::Address rendezvous;  // where the communicator's rendezvous connection went
  launch::ResolvedConfig config;  // job_id, token, timeout
  // rank: the job rank; world_size: the communicator's size; generation: its
  // join number; host, pid and versions as at init.
  rv::MemberInfo info;
  uint32_t generation = 0;  // the generation recovered from
  rv::RecoverKind kind = rv::RecoverKind::shrink;
  int nranks = 0;  // regrow
  bool can_shrink = false;
  std::vector<uint8_t> seat;  // the communicator's (rv::Joined::seat)
  std::chrono::steady_clock::time_point deadline;
};

struct RecoverResult {
  std::unique_ptr<rv::Client> client;  // the new generation's connection
  rv::Joined joined;                   // what the server decided
};

const char* recover_call(rv::RecoverKind kind);  // "cc_comm_shrink", "cc_comm_regrow"

// Errors carry the server's message (a mismatch, a stale rank, the deadline
// naming who never came) or name the rendezvous that cannot be reached.
Status rendezvous_recover(const RecoverRequest& request, const rv::Membership::MakeId& make_id,
                          RecoverResult* out);

// What the new generation's connection heard so far: CC_ERR_PEER_FAILED
// naming a member of it that failed or aborted, or the server gone; success
// while nothing did. `kind` names the call to make again.
Status new_generation_events(rv::Membership& membership, rv::RecoverKind kind, uint32_t generation);

}  // namespace cc::comm
