// What the rendezvous server holds of one generation's reachability test
// (preflight.cpp): each member's facts for the rule (its PreflightReady, who
// it is, where its connection comes from, its report), the requests parked
// until the plan and the verdict, and the verdict once known. Only the files
// of this folder include this header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "rendezvous/protocol.hpp"
#include "rendezvous/rules/preflight_rules.hpp"

namespace cc::rv::server_core {

struct PreflightMember {
  bool ready = false;     // its PreflightReady arrived
  bool reported = false;  // its PreflightReport arrived
  uint64_t parked = 0;    // its pending request (ready or report), 0 when none
  PreflightReady endpoint;
  std::string peer;  // the address its rendezvous connection comes from
  std::vector<ProbeResult> results;
};

struct Preflight {
  // gathering: waiting for every member's endpoint; probing: the plans went
  // out, waiting for the reports; then one verdict for the whole generation.
  enum class Phase : uint8_t {
    gathering,
    probing,
    passed,
    failed,
    skipped
  } phase = Phase::gathering;
  std::vector<PreflightMember> members;      // by rank, sized on the first PreflightReady
  std::vector<rules::PreflightFacts> facts;  // by rank, as members
  int32_t ready = 0;
  int32_t reported = 0;
  int32_t disabled_by = -1;  // the first rank that runs with CC_PREFLIGHT=0
  cc_result_t code = CC_SUCCESS;
  std::string verdict;  // the failure's message, or why the test was skipped

  bool decided() const { return phase != Phase::gathering && phase != Phase::probing; }
};

}  // namespace cc::rv::server_core
