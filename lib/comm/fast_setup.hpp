// Setting up and tearing down cc's all-reduce kernels on a communicator
// (lib/fast/): the peer buffers mapped through CUDA IPC handles exchanged
// over the rendezvous store (or NCCL for a split child), and the plan of
// which sizes the kernels serve.
#pragma once

#include <chrono>

#include "common/status.hpp"
#include "lib/comm/comm.hpp"

namespace cc::comm {

// Collective, after the NCCL communicators and comm->scratch exist: every
// rank says whether it can take part and exports its peer buffer, every
// rank maps the others', they agree it worked everywhere, and rank 0's
// plan (explicit, inherited from the parent, cached, or measured now by all)
// is shared. A rank that cannot makes all use ncclAllReduce; the reason is
// logged at info. Fails when the plan given is not one, when the agreement
// itself does (deadline, NCCL error, or `interrupted`: news from the
// rendezvous during init, asked between slices of the store's waits), or
// when CC_FAST_ALLREDUCE=require cannot be met.
Status setup_fast_allreduce(cc_comm* c, std::chrono::steady_clock::time_point deadline,
                            const core::Interrupt& interrupted = {});

// Waits for its last kernel until `deadline`; false when it had to be
// stopped (a rank never made the matching call).
bool drain_fast_allreduce(cc_comm* c, std::chrono::steady_clock::time_point deadline);

// On a healthy cc_comm_destroy, after drain: unmaps the peers' buffers and
// waits (up to 10 s) until every rank did, so that no rank frees its buffer
// while another still maps it. False when a rank did not come (a split
// child's NCCL communicator is aborted then: do not finalize it).
bool unmap_fast_allreduce_peers(cc_comm* c, std::chrono::steady_clock::time_point deadline);

// Frees it (call with no kernel of it running: after the stream work, or
// after an abort, which ends its kernels).
void teardown_fast_allreduce(cc_comm* c);

}  // namespace cc::comm
