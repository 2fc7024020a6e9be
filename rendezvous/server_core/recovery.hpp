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
#include "rendezvous/rules/recovery_state.hpp"
#include "rendezvous/server_core.hpp"

namespace cc::rv::server_core {

// The server's side of one process of the current generation, by job rank
// (the rules' side is in Lineage::rules).
struct Seat {
  // Its connections holding a membership of this communicator, of any
  // generation (a survivor keeps its old one while it recovers): none left,
  // it is gone; one that ended without Leave made it dead.
  int32_t open = 0;
  // Taking part in the recovery in progress: its Recover (or RecoverId) is
  // parked as `parked` on `conn`; parked is 0 between RecoverIdWanted and
  // its RecoverId.
  uint64_t parked = 0;
  ConnId conn = 0;
  // Handed to its process in Joined: a Recover in its place must bring it
  // (empty on a successor whose member resumed without one: none asked).
  std::vector<uint8_t> secret;
};

// A new process that joined with the rank of a failed one, waiting for a
// regrow to take it: where its Join is parked.
struct Replacement {
  ConnId conn = 0;
  uint64_t parked = 0;
};

// A communicator's generations, as far as the server needs them.
struct Lineage {
  // Its current generation, and the shrink or regrow in progress, as every
  // backend decides it (rendezvous/rules/recovery_state.hpp).
  rules::Recovery rules;
  std::map<int32_t, Seat> seats;                // by job rank
  std::map<int32_t, Replacement> replacements;  // by the rank each replaces
  int32_t id_maker = -1;  // the job rank asked for the id (RecoverIdWanted), or -1
  std::vector<uint8_t> unique_id;
  // The last failed attempt, told to an id maker whose RecoverId comes after it.
  std::string last_failure;
  uint32_t last_failure_code = 0;  // a cc_result_t
  ConnId last_id_maker = 0;
};

}  // namespace cc::rv::server_core
