// The reachability test before NCCL's init, as every rendezvous backend
// decides it (cc's server: server_core/preflight.cpp; etcd:
// etcd/backend_preflight.cpp), so a member reads the same plan and the same
// verdict whichever rendezvous its job uses. Pure: no sockets, no I/O.
//
// - The plan: each member connects to its ring successor (rank + 1), and the
//   lowest rank of each host to the root (rank 0), unless its successor is
//   the root. Members on one host (the same host_key: NCCL_HOSTID, or host
//   name and boot id) are skipped, as are targets that cannot be tested (port
//   0). No target anywhere (one host): the test passes at once.
// - The verdict, from the reports at hand: every failed connection fails the
//   test, with a message that says who cannot reach whom, at which address, the
//   connect error, the likely cause and the fix, from what the rendezvous
//   knows of both ends: the address NCCL will use, its interface and whether
//   NCCL_SOCKET_IFNAME was set by hand, the route to the rendezvous, the
//   address the member's connection came from (a NAT shows there; empty
//   where the backend cannot see it), and whether the other way worked.
// - The test is skipped (a note, not an error) when a member runs with
//   CC_PREFLIGHT=0, or when a member did not send its endpoint in time.
// - A member's failure while the test is undecided fails it (cc's server:
//   server_core/init_failures.cpp, rule 3), in the message below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::rv::rules {

// What the rendezvous knows of one member of the tested generation.
struct PreflightFacts {
  MemberInfo info;       // its join's: rank, host, pid
  PreflightReady ready;  // its endpoint and network facts
  std::string peer;      // the address its rendezvous connection came from; empty: unknown
  bool reported = false;
  std::vector<ProbeResult> results;  // its report's, when reported
};

// The targets of every member, by rank (members: by rank, every one ready).
std::vector<std::vector<ProbeTarget>> preflight_targets(const std::vector<PreflightFacts>& members);

// The one verdict, from the reports at hand.
struct PreflightVerdict {
  bool passed = true;
  std::string words;            // a failure's message, the same for every member
  size_t tested = 0;            // the connections reported
  std::vector<int32_t> silent;  // the ranks that did not report
};
PreflightVerdict preflight_verdict(const std::vector<PreflightFacts>& members);

// The note when `off` runs with CC_PREFLIGHT=0 (`where`: communicator_where()).
std::string preflight_disabled_words(const MemberInfo& off, const std::string& where);

// The note when `missing` (sorted ranks) sent no endpoint within timeout_ms.
std::string preflight_missing_words(const std::vector<int32_t>& missing, const std::string& where,
                                    uint32_t timeout_ms);

// A member's failure while the test is undecided (`who`: cc::who of its
// rank in the generation, host and pid; `reason`: the event's message).
std::string preflight_member_failed_words(PeerEventKind kind, const std::string& who,
                                          const std::string& reason);

}  // namespace cc::rv::rules
