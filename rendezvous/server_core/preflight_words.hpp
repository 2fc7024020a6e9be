// The words of a failed reachability test (preflight.cpp): who cannot reach
// whom, at which address, the connect error, and the likely cause and fix,
// from what the server knows of both ranks: the address NCCL will use, its
// interface and whether NCCL_SOCKET_IFNAME was set by hand, the route to the
// rendezvous, the address the rank's connection came from (a NAT shows
// there), and whether the other way worked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/server_core/state.hpp"

namespace cc::rv::server_core {

struct FailedProbe {
  int32_t from = -1;
  const ProbeResult* result = nullptr;  // result->rank is the target
};

// One text for every rank: the first failure in full, the others after it.
std::string preflight_failure_words(const CommJoin& gen, const std::vector<FailedProbe>& failed);

}  // namespace cc::rv::server_core
