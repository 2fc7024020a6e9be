// ncclCommAbort off the caller's path. Aborting an NCCL communicator whose
// peer died can take about a second (NCCL tears down its proxy and
// connections to a rank that no longer answers); a survivor that lets go of
// its failed communicator should not wait for that. One background thread
// aborts what it is handed, in order; the process waits for it at exit. An
// abort that waits for CUDA graphs gets a thread of its own.
#pragma once

#include <atomic>
#include <memory>

#include <nccl.h>

namespace cc::core {

// Hands `nccl` (owned from here) to the background thread, which aborts it
// with `device` current.
void abort_later(ncclComm_t nccl, int device);

// Aborts `nccl` (owned from here) on a thread of its own, with `device`
// current: CUDA graphs that captured its calls still live (`graphs` counts
// them), and NCCL's abort stops the kernels at once but then waits for
// those graphs without end. At exit the process waits a few seconds at most
// for such an abort whose graphs are gone, never for one whose graphs live.
void abort_after_graphs(ncclComm_t nccl, int device,
                        std::shared_ptr<const std::atomic<int>> graphs);

}  // namespace cc::core
