// One collective call of cc-bench, on cc or on the raw NCCL communicator,
// and the nccl-tests figures that go with it (sizes, bus bandwidth factor).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "tools/cc-bench/bench_data.hpp"

namespace cc::tools::bench {

// The buffers of one call, already offset for in-place runs.
struct Call {
  Shape shape;
  const void* send;
  void* recv;
  bool in_place;
};

// Whether a collective has an in-place form (alltoall and the send/recv ring
// do not).
bool has_in_place(Coll c);

// The count passed to the call for a row of `bytes` total bytes (nccl-tests:
// per-rank for allgather, reducescatter, alltoall), 0 when too small.
size_t call_count(Coll c, size_t bytes, size_t elem_size, int nranks);
// The size column: total bytes the row moves, as nccl-tests prints it.
size_t row_bytes(Coll c, size_t count, size_t elem_size, int nranks);
// nccl-tests' bus bandwidth factor.
double busbw_factor(Coll c, int nranks);

// Points send and recv into buf_a (send side) and buf_b (receive side) for
// the mode, as nccl-tests does: in-place allgather sends from this rank's
// slot of recv, in-place reducescatter receives into its slot of send.
Call make_call(const Shape& s, bool in_place, void* buf_a, void* buf_b);

// Enqueues the call on `stream`. The cc one returns a cc_result_t (its
// message in cc_last_error), the raw one an ncclResult_t.
cc_result_t enqueue_cc(const Call& c, cc_comm_t comm, cudaStream_t stream);
ncclResult_t enqueue_raw(const Call& c, ncclComm_t comm, cudaStream_t stream);

}  // namespace cc::tools::bench
