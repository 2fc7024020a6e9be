// A rank's part of the reachability test before NCCL's init (the server's
// part: rendezvous/server_core/preflight.cpp). Before its join the rank
// works out the address NCCL will use and listens there; after the join it
// sends that endpoint, connects to the ranks of its plan, reports, and gets
// one verdict for the whole generation. No CUDA here: CI runs it with
// processes in network namespaces as hosts.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/settings.hpp"
#include "common/status.hpp"
#include "lib/comm/preflight_probe.hpp"
#include "rendezvous/membership.hpp"

namespace cc::comm {

// How long one test connection may take: a healthy connect is well under a
// millisecond on a LAN; a firewall that drops packets shows as no answer.
inline constexpr std::chrono::milliseconds kProbeTimeout{1200};

struct PreflightSetup {
  bool enabled = true;  // CC_PREFLIGHT
  std::string host_key;
  std::string addr;  // where NCCL will listen on this host
  std::string ifname;
  std::string user_ifname;  // NCCL_SOCKET_IFNAME set by the user, else empty
  std::string route_ifname, route_addr;
  // This rank cannot start (NCCL would fail at once: no interface): it says
  // so after its join, so the others stop too.
  Status cannot_start;
  std::unique_ptr<PreflightListener> listener;  // null: this rank cannot be tested
};

// Whether CC_PREFLIGHT leaves the test on (its error names a malformed value).
Status preflight_enabled(const settings::Getenv& getenv, bool* on);

// Opens the listener on setup->addr when the test is on; a listener that
// cannot be opened leaves this rank untested, with a warning.
void preflight_listen(PreflightSetup* setup, const std::string& who);

// After the join: the test for communicator `comm_number` of `job_id`. Success, or the
// verdict's message (CC_ERR_SYSTEM: who cannot reach whom), or a member's
// failure (CC_ERR_PEER_FAILED). `who` starts this rank's messages.
Status run_preflight(rv::Membership& client, const std::string& job_id, uint32_t comm_number,
                     int rank, PreflightSetup& setup,
                     std::chrono::steady_clock::time_point deadline, const std::string& who);

}  // namespace cc::comm
