// The small-message all-reduce: one kernel of cc's own on NCCL's device API
// (NCCL 2.28+), in place of ncclAllReduce for up to kMaxBytes when every
// rank is load/store reachable (one NVLink domain).
//
// Each rank writes its data, with a flag per 4 bytes (NCCL's LL format),
// straight into every peer's inbox in NCCL's symmetric memory, then reduces
// what its own inbox received in rank order: one one-way NVLink trip and no
// barrier, where ncclAllReduce pays NCCL's host-side planning on every call.
// Results are the same on every rank (same order of operations).
//
// The device API's structures are compiled in from nccl_device.h, so the
// path is used only when the NCCL loaded is exactly the NCCL built against;
// otherwise (and with CC_FAST_ALLREDUCE=0) cc calls ncclAllReduce as before.
#pragma once

#include <cstddef>
#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace cc::fast {

inline constexpr size_t kMaxBytes = 64 * 1024;
inline constexpr int kMaxRanks = 8;

struct Channel;  // one per communicator that uses the path

// Whether this build carries the kernels and this process could use them
// (NCCL version, device, rank count); `why` says why not.
bool locally_possible(int nranks, int device, std::string* why);

// Collective over `nccl` (every rank calls it when all agreed): makes the
// device communicator and the inbox. Null with `why` on failure.
Channel* create(ncclComm_t nccl, int device, std::string* why);

// Zeroes this rank's inbox on `stream`; the caller then synchronizes all
// ranks before the first use.
cudaError_t clear_inbox(Channel* ch, cudaStream_t stream);

// Frees the channel's own memory. The device communicator is left to
// ncclCommFinalize/Destroy, which free every window still registered:
// ncclDevCommDestroy deregisters a window, which may wait for the other
// ranks, with no deadline.
void destroy(Channel* ch);

// Waits until the last call's kernel finished, up to `deadline_ms` from
// now; past it, makes it give up (request_abort) and returns false.
bool drain(Channel* ch, long long deadline_ms);

// Makes kernels in flight give up (a peer died or the comm is aborting);
// safe from any thread, any number of times.
void request_abort(Channel* ch);

// True when (count, datatype, op) go through the fast kernel. Depends on
// nothing but its arguments, so every rank decides the same.
bool takes(size_t count, ncclDataType_t type, ncclRedOp_t op);

// Enqueues the all-reduce on `stream` (after the previous one, whatever
// stream that was on). Call only when takes() said yes; `capturing` is
// whether `stream` is capturing a CUDA graph.
cudaError_t allreduce(Channel* ch, const void* send, void* recv, size_t count, ncclDataType_t type,
                      ncclRedOp_t op, cudaStream_t stream, bool capturing);

// After a successful allreduce(): `recorded` is an event already recorded on
// `stream` after it (the watchdog's), or null to have the channel record its
// own. The next call on another stream waits for it.
void launched(Channel* ch, cudaStream_t stream, bool capturing, cudaEvent_t recorded);

}  // namespace cc::fast
