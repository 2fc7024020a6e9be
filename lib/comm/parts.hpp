// The parts a communicator is made of, shared by init, split, recovery and
// destroy: the NCCL id, the two NCCL communicators, the barrier's scratch
// int, the watchdog's view, and taking a half-made communicator apart again.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.hpp"
#include "lib/comm/comm.hpp"

namespace cc::comm {

using Clock = std::chrono::steady_clock;

// Makes c->nccl_ctl from `ids` (lib/comm/nccl_ids.hpp: one id,
// ncclCommInitRankConfig; several, ncclCommInitRankScalable; the first only
// where the NCCL loaded has no scalable init), non-blocking
// so that the deadline holds, and waits until it is ready. Returns NCCL's
// result: ncclInProgress when the deadline passed, the communicator is being
// aborted or `interrupted` ended the wait.
ncclResult_t make_ctl_comm(cc_comm* c, std::vector<ncclUniqueId>& ids, Clock::time_point deadline,
                           const core::Interrupt& interrupted);
// The NCCL call make_ctl_comm makes from that many ids, for messages.
const char* ctl_init_call(size_t id_count);

// Makes c->nccl, the blocking communicator that does the work, by splitting
// the non-blocking c->nccl_ctl with every rank in one colour. The split runs
// on the non-blocking parent, so it too has a deadline; during init,
// `interrupted` ends the wait early (news from the rendezvous).
Status make_work_comm(cc_comm* c, Clock::time_point deadline,
                      const core::Interrupt& interrupted = {});

Status alloc_scratch(cc_comm* c);
void free_scratch(cc_comm* c);

// Hands a ready communicator to the process's watchdog (unless
// CC_WATCHDOG=0). A communicator with a rendezvous connection gets a control
// channel: the server watches its heartbeats from here on. A child made by
// cc_comm_split (`split`: its number among its parent's splits, and its
// color) sends its calls' points on its parent's channel instead.
struct SplitOf {
  cc_comm* parent = nullptr;
  uint32_t number = 0;
  int color = 0;
};
Status start_watch(cc_comm* c, bool embedded, const SplitOf& split = {});
void stop_watch(cc_comm* c);

// Frees what a half-made communicator holds, on an init failure. Rank 0's
// embedded server stays up (up to a second) until the other ranks, told of
// the failure, have left.
void discard(cc_comm* c);

}  // namespace cc::comm
