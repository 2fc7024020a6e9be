// What the rendezvous server holds to recover a communicator after a failure
// (recovery.cpp does the work): the members of its current generation, one
// Seat per process, and the shrink or regrow in progress, if any, with the
// replacements waiting to fill a failed rank. Only the files of this folder
// include this header.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"
#include "rendezvous/rules/recovery_rules.hpp"
#include "rendezvous/server_core.hpp"

namespace cc::rv::server_core {

// One process of the current generation of a communicator, by job rank.
struct Seat {
  MemberInfo info;  // rank: the job rank; host and pid name the process
  int32_t position = 0;  // its rank in the current generation (seats in job-rank order)
  // Its connections holding a membership of this communicator, of any
  // generation (a survivor keeps its old one while it recovers).
  int32_t open = 0;
  bool dead = false;  // a connection of it ended without Leave, or went silent
  std::string dead_why;
  // Taking part in the recovery in progress: its Recover (or RecoverId) is
  // parked as `parked` on `conn`; parked is 0 between RecoverIdWanted and
  // its RecoverId.
  bool taking_part = false;
  uint64_t parked = 0;
  ConnId conn = 0;
  bool can_shrink = false;
  // Waited for: alive, and not yet taking part.
  bool awaited() const { return !dead && open > 0 && !taking_part; }
};

// A new process that joined with the rank of a failed one, waiting for a
// regrow to take it.
struct Replacement {
  ConnId conn = 0;
  uint64_t parked = 0;
  MemberInfo info;
  std::vector<uint8_t> unique_id;  // rank 0 brings one from its Join
};

// A communicator's generations, as far as the server needs them.
struct Lineage {
  uint32_t generation = 0;  // the current generation
  int32_t nccl_major_minor = 0;
  std::map<int32_t, Seat> seats;  // its members by job rank; rank = position
  std::map<int32_t, Replacement> replacements;

  // The shrink or regrow in progress (pending), from generation `generation`.
  bool pending = false;
  // The first call, which every survivor must make (rendezvous/rules).
  rules::RecoveryAgreement agreement;
  RecoverKind kind() const { return agreement.kind(); }
  int32_t nranks() const { return agreement.nranks(); }  // regrow
  size_t awaited = 0;     // seats for which Seat::awaited() holds
  int32_t id_maker = -1;  // the job rank asked for the id (RecoverIdWanted), or -1
  std::vector<uint8_t> unique_id;
  // The last failed attempt, told to an id maker whose RecoverId comes after it.
  std::string last_failure;
  uint32_t last_failure_code = 0;  // a cc_result_t
  ConnId last_id_maker = 0;
};

}  // namespace cc::rv::server_core
