// The part of a communicator's birth that needs no GPU, in order: the
// network interface NCCL will use (cc sets NCCL_SOCKET_IFNAME to the one
// that reaches the rendezvous unless the user set it), the reachability
// test's listener on NCCL's address, the join, and the test itself. A
// failure after the join is told to the other ranks (or, when the
// rendezvous brought it, not told again) before start returns. Then init.cpp
// creates the NCCL communicators while an InitListener listens for news. Tests
// run start with processes or threads as ranks and no GPU.
#pragma once

#include <string>

#include "common/settings.hpp"
#include "common/status.hpp"
#include "lib/comm/rendezvous_join.hpp"

namespace cc::comm {

struct StartRequest {
  RendezvousRequest rendezvous;  // its info.nccl_addr is filled here
  settings::Getenv getenv = settings::process_env();
  // Whether to put NCCL_SOCKET_IFNAME into this process's environment for
  // NCCL (the library does; tests whose threads play ranks do not).
  bool set_env = true;
  // Tests whose threads play ranks on several hosts set NCCL's host id and
  // address themselves; empty: worked out as NCCL does (lib/launch/nccl_net).
  std::string host_key_override;
  std::string addr_override;
};

Status start(StartRequest request, const MakeId& make_id, RendezvousResult* out);

}  // namespace cc::comm
