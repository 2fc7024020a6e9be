// Argument checks for the communicator and collective calls, done before
// NCCL sees anything. No CUDA here: unit-tested on any machine. On success
// nothing is allocated (the hot path stays allocation-free); on failure the
// Status messages name the call, who (rank, host), the argument and its value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cc/cc.h"
#include "common/datatypes.hpp"
#include "common/status.hpp"

namespace cc::comm::args {

// Who is calling, for the message of an error:
// "cc_allreduce on rank 1 (host h, pid 42)".
struct Caller {
  const char* call = "";
  int rank = -1;  // -1 when unknown (no communicator yet)
  const std::string* host = nullptr;
  uint32_t pid = 0;
  int generation = -1;  // the communicator's (cc_comm_generation); -1: unsaid (0, or none yet)
};
std::string who(const Caller& c);

Status check_datatype(const Caller& c, cc_datatype_t dtype);
Status check_redop(const Caller& c, cc_redop_t op);
// A NULL buffer is only fine with a zero count.
Status check_buffer(const Caller& c, const char* name, const void* buf, size_t count);
// value must lie in [0, nranks).
Status check_rank(const Caller& c, const char* name, int value, int nranks);
// count * multiplier * element size must fit size_t; on success *bytes gets it.
// `multiplier` is the rank count for allgather/reducescatter/alltoall, else 1.
Status check_bytes(const Caller& c, const char* count_name, size_t count, size_t multiplier,
                   cc_datatype_t dtype, size_t* bytes);

}  // namespace cc::comm::args
