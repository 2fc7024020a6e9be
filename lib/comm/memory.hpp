// The fast paths' memory: memory NCCL can reach without copies
// (ncclMemAlloc), buffer registration (ncclCommRegister) and symmetric
// windows (ncclCommWindowRegister, NCCL 2.27+, looked up at run time so
// libcc still loads with an older NCCL). Errors name the call.
#pragma once

#include <cstddef>

#include "common/status.hpp"
#include "lib/comm/comm.hpp"

namespace cc::comm {

Status mem_alloc(void** ptr, size_t size);
Status mem_free(void* ptr);
Status register_buffer(cc_comm* comm, void* buf, size_t size, void** handle);
Status deregister_buffer(cc_comm* comm, void* handle);
Status register_window(cc_comm* comm, void* buf, size_t size, void** window);
Status deregister_window(cc_comm* comm, void* window);

}  // namespace cc::comm
