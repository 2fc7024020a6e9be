// ncclCommAbort off the caller's path. Aborting an NCCL communicator whose
// peer died can take about a second (NCCL tears down its proxy and
// connections to a rank that no longer answers); a survivor that lets go of
// its failed communicator should not wait for that. One background thread
// aborts what it is handed, in order; the process waits for it at exit.
#pragma once

#include <nccl.h>

namespace cc::core {

// Hands `nccl` (owned from here) to the background thread, which aborts it
// with `device` current.
void abort_later(ncclComm_t nccl, int device);

}  // namespace cc::core
