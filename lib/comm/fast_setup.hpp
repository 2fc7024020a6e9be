// Setting up and tearing down cc's small-message all-reduce on a
// communicator (the kernel is in fast_allreduce.cu).
#pragma once

#include <chrono>

#include "common/status.hpp"
#include "lib/comm/comm.hpp"

namespace cc::comm {

// Collective, after the NCCL communicators and comm->scratch exist: every
// rank says whether it can use the path, they agree (ncclAllReduce, MIN),
// make it together and agree again that it worked on all of them. A rank
// that cannot makes all use ncclAllReduce; the reason is logged at info.
// Fails only when the agreement itself does (deadline, NCCL error).
Status setup_fast_allreduce(cc_comm* c, std::chrono::steady_clock::time_point deadline);

// Waits for its last kernel until `deadline`; false when it had to be
// stopped (a rank never made the matching call).
bool drain_fast_allreduce(cc_comm* c, std::chrono::steady_clock::time_point deadline);

// Frees it (call with no kernel of it running: after the stream work, or
// after an abort, which ends its kernels).
void teardown_fast_allreduce(cc_comm* c);

}  // namespace cc::comm
