// cc's own all-reduce on one communicator: the peer buffers, the device
// state the kernels share, the plan that says which sizes they serve, and
// the ordering of calls across streams. Set up by lib/fast_setup.cpp,
// called from cc_allreduce.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "lib/fast/kernels.hpp"
#include "lib/fast/peer_memory.hpp"
#include "lib/fast/plan.hpp"

namespace cc::fast {

struct Channel;

// Whether this build carries the kernels and this process could use them
// (device, rank count); `why` says why not.
bool locally_possible(int nranks, int device, std::string* why);

// Allocates this rank's peer buffer (on the current device) and device
// state; `record` is what to send the other ranks. On failure returns null
// and record->able is 0 with the reason in record->why.
Channel* prepare(int rank, int nranks, int device, const std::string& host, PeerRecord* record);

// Maps every peer's buffer from their records (indexed by rank).
bool connect(Channel* ch, const std::vector<PeerRecord>& records, std::string* why);

// The sizes each kernel can take on this communicator.
Capacity capacity(const Channel* ch);

// Sets the plan (the same on every rank).
void set_plan(Channel* ch, const Plan& plan);
const Plan& plan(const Channel* ch);

// Unmaps the peers' buffers (no kernel of it may run any more); destroy()
// frees the rest.
void close_peers(Channel* ch);

// Frees everything (call with no kernel of it running: after the stream
// work, or after an abort, which ends its kernels).
void destroy(Channel* ch);

// Waits until the last call's kernel finished, up to `deadline_ms` from
// now; past it, makes it give up (request_abort) and returns false.
bool drain(Channel* ch, long long deadline_ms);

// Makes kernels in flight give up (a peer died or the comm is aborting);
// safe from any thread, any number of times.
void request_abort(Channel* ch);

// Enqueues the all-reduce on `stream` through `algo` (after the previous
// call, whatever stream that was on). `capturing`: `stream` captures a graph.
cudaError_t allreduce(Channel* ch, Algo algo, const void* send, void* recv, size_t count,
                      ncclDataType_t type, ncclRedOp_t op, cudaStream_t stream, bool capturing);

// The same with an explicit block cap, for the measurement at init.
cudaError_t allreduce_blocks(Channel* ch, Algo algo, int max_blocks, const void* send, void* recv,
                             size_t count, ncclDataType_t type, ncclRedOp_t op,
                             cudaStream_t stream);

// After a successful allreduce(): `recorded` is an event already recorded on
// `stream` after it (the watchdog's), or null to have the channel record its
// own. The next call on another stream waits for it.
void launched(Channel* ch, cudaStream_t stream, bool capturing, cudaEvent_t recorded);

// The path for this call: nccl unless the plan gives it to a kernel that
// takes the type and op. Depends only on the arguments and the plan, so
// every rank decides the same.
inline Algo choose(const Channel* ch, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  size_t es = 0;
  if (ch == nullptr || count == 0 || !kernel_supports(type, op, &es)) return Algo::nccl;
  return plan(ch).choose(count * es);
}

}  // namespace cc::fast
