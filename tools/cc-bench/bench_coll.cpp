#include "tools/cc-bench/bench_coll.hpp"

#include <type_traits>

namespace cc::tools::bench {
namespace {

cc_stream_t to_cc(cudaStream_t s) { return reinterpret_cast<cc_stream_t>(s); }
ncclDataType_t to_nccl(cc_datatype_t t) { return static_cast<ncclDataType_t>(t); }
ncclRedOp_t to_nccl(cc_redop_t op) { return static_cast<ncclRedOp_t>(op); }

template <class T>
T* offset(T* p, size_t bytes) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + bytes);
}

}  // namespace

bool has_in_place(Coll c) { return c != Coll::alltoall && c != Coll::sendrecv; }

size_t call_count(Coll c, size_t bytes, size_t elem_size, int nranks) {
  const size_t elems = bytes / elem_size;
  switch (c) {
    case Coll::allgather:
    case Coll::reducescatter:
    case Coll::alltoall:
      return elems / static_cast<size_t>(nranks);
    default:
      return elems;
  }
}

size_t row_bytes(Coll c, size_t count, size_t elem_size, int nranks) {
  switch (c) {
    case Coll::allgather:
    case Coll::reducescatter:
    case Coll::alltoall:
      return count * static_cast<size_t>(nranks) * elem_size;
    default:
      return count * elem_size;
  }
}

double busbw_factor(Coll c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Coll::allreduce:
      return 2.0 * (n - 1) / n;
    case Coll::allgather:
    case Coll::reducescatter:
    case Coll::alltoall:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

Call make_call(const Shape& s, bool in_place, void* buf_a, void* buf_b) {
  Call c{s, buf_a, buf_b, in_place};
  if (!in_place) return c;
  const size_t slot = s.count * dtype_size(s.dtype) * static_cast<size_t>(s.rank);
  switch (s.coll) {
    case Coll::allgather:  // send is this rank's slot of recv
      c.recv = buf_b;
      c.send = offset(static_cast<const void*>(buf_b), slot);
      break;
    case Coll::reducescatter:  // recv is this rank's slot of send
      c.send = buf_a;
      c.recv = offset(buf_a, slot);
      break;
    default:
      c.send = buf_b;
      c.recv = buf_b;
      break;
  }
  return c;
}

cc_result_t enqueue_cc(const Call& c, cc_comm_t comm, cudaStream_t stream) {
  const Shape& s = c.shape;
  const auto st = to_cc(stream);
  switch (s.coll) {
    case Coll::allreduce:
      return cc_allreduce(c.send, c.recv, s.count, s.dtype, s.op, comm, st);
    case Coll::allgather:
      return cc_allgather(c.send, c.recv, s.count, s.dtype, comm, st);
    case Coll::reducescatter:
      return cc_reducescatter(c.send, c.recv, s.count, s.dtype, s.op, comm, st);
    case Coll::broadcast:
      return cc_broadcast(c.send, c.recv, s.count, s.dtype, s.root, comm, st);
    case Coll::reduce:
      return cc_reduce(c.send, c.recv, s.count, s.dtype, s.op, s.root, comm, st);
    case Coll::alltoall:
      return cc_alltoall(c.send, c.recv, s.count, s.dtype, comm, st);
    case Coll::sendrecv: {
      const int to = (s.rank + 1) % s.nranks, from = (s.rank - 1 + s.nranks) % s.nranks;
      cc_result_t r = cc_group_start();
      if (r != CC_SUCCESS) return r;
      r = cc_send(c.send, s.count, s.dtype, to, comm, st);
      if (r == CC_SUCCESS) r = cc_recv(c.recv, s.count, s.dtype, from, comm, st);
      // Close the group whatever happened; the first failure is the one to report.
      const cc_result_t end = cc_group_end();
      return r != CC_SUCCESS ? r : end;
    }
  }
  return CC_ERR_INTERNAL;
}

ncclResult_t enqueue_raw(const Call& c, ncclComm_t comm, cudaStream_t stream) {
  const Shape& s = c.shape;
  const auto type = to_nccl(s.dtype);
  switch (s.coll) {
    case Coll::allreduce:
      return ncclAllReduce(c.send, c.recv, s.count, type, to_nccl(s.op), comm, stream);
    case Coll::allgather:
      return ncclAllGather(c.send, c.recv, s.count, type, comm, stream);
    case Coll::reducescatter:
      return ncclReduceScatter(c.send, c.recv, s.count, type, to_nccl(s.op), comm, stream);
    case Coll::broadcast:
      return ncclBroadcast(c.send, c.recv, s.count, type, s.root, comm, stream);
    case Coll::reduce:
      return ncclReduce(c.send, c.recv, s.count, type, to_nccl(s.op), s.root, comm, stream);
    case Coll::alltoall: {
      // The same grouped send/recv pairs cc uses.
      const size_t chunk = s.count * dtype_size(s.dtype);
      ncclResult_t r = ncclGroupStart();
      for (int p = 0; r == ncclSuccess && p < s.nranks; ++p) {
        r = ncclSend(offset(c.send, chunk * static_cast<size_t>(p)), s.count, type, p, comm,
                     stream);
        if (r == ncclSuccess)
          r = ncclRecv(offset(c.recv, chunk * static_cast<size_t>(p)), s.count, type, p, comm,
                       stream);
      }
      const ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    }
    case Coll::sendrecv: {
      const int to = (s.rank + 1) % s.nranks, from = (s.rank - 1 + s.nranks) % s.nranks;
      ncclResult_t r = ncclGroupStart();
      if (r == ncclSuccess) r = ncclSend(c.send, s.count, type, to, comm, stream);
      if (r == ncclSuccess) r = ncclRecv(c.recv, s.count, type, from, comm, stream);
      const ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    }
  }
  return ncclInternalError;
}

}  // namespace cc::tools::bench
