// What cc-run's node agent adds to a communicator's start: 2 ranks of one
// host (threads running cc_comm_init's path without NCCL, lib/comm/startup)
// against cc's server started here, as cc-run hosts it (with an etcd
// address too, the elected host runs the same server). Each round once
// straight to the server and once through a node agent started for the
// round's job, as cc-run starts one before its ranks. Prints both medians and their difference. NCCL's part of an init
// is the same either way: the agent only carries the rendezvous's messages.
// False when a start failed.
#pragma once

#include <string>

namespace cc::tools::rendezvous_bench {

bool run_agent_pair(int rounds);

}  // namespace cc::tools::rendezvous_bench
