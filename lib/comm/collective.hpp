// The one path of every collective and point-to-point call: each entry point
// describes itself (kind, buffers, count, type, op, root or peer) and
// enqueue() checks the handle and the arguments, then makes the one NCCL
// call (or cc's own kernel) on the caller's stream. Hot path: no allocation,
// no lock, no logging.
#pragma once

#include <cstddef>

#include "cc/cc.h"
#include "common/call_desc.hpp"
#include "lib/comm/comm.hpp"

namespace cc::comm {

// What a call is: the kinds the call check fingerprints (common/call_desc.hpp).
using Kind = cc::CallKind;

struct Collective {
  Kind kind;
  const char* call;  // the entry point, for messages: "cc_allreduce"
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // as the entry point names it: count, sendcount or recvcount
  cc_datatype_t dtype = CC_INT8;
  cc_redop_t op = CC_SUM;
  int root = -1;  // broadcast, reduce
  int peer = -1;  // send, recv
};

cc_result_t enqueue(const Collective& coll, cc_comm* comm, cc_stream_t stream);

// cc_group_start/end: NCCL's groups, with every communicator touched inside
// one counted as in use until the group is launched.
cc_result_t group_start();
cc_result_t group_end();

}  // namespace cc::comm
