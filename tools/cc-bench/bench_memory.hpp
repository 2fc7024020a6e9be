// cc-bench's two device buffers: from cudaMalloc, or from cc_mem_alloc and
// registered (a symmetric window when the NCCL loaded has them, else
// ncclCommRegister) with the cc communicator and, for --raw, the same way
// with the raw one.
#pragma once

#include <cstddef>
#include <string>

#include <nccl.h>

#include "tools/cc-bench/bench_options.hpp"

namespace cc::tools::bench {

struct Buffers {
  void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;
  Mem mem = Mem::device;
  Reg reg = Reg::none;      // what was done: none, local or window
  void* cc_handle[2] = {};  // registration handles or windows, per buffer
  void* raw_handle[2] = {};
};

struct Status {
  bool ok = true;
  std::string message;
};

// Allocates and registers; *registration gets "none", "local" or "window".
Status allocate_buffers(const Options& opt, cc_comm_t comm, ncclComm_t raw, Buffers* bufs,
                        std::string* registration);
// Deregisters (collective for windows: every rank calls it) and frees.
void free_buffers(cc_comm_t comm, ncclComm_t raw, Buffers* bufs);

}  // namespace cc::tools::bench
