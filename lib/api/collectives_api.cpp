// The collectives and point-to-point calls: each describes itself and hands
// over to the one checking path, lib/comm/collective.cpp.
#include "cc/cc.h"
#include "common/last_error.hpp"
#include "lib/comm/collective.hpp"

using cc::comm::Collective;
using cc::comm::enqueue;
using cc::comm::Kind;

extern "C" {

CC_API cc_result_t cc_allreduce(const void* sendbuf, void* recvbuf, size_t count,
                                cc_datatype_t dtype, cc_redop_t op, cc_comm_t comm,
                                cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  return enqueue({Kind::allreduce, "cc_allreduce", sendbuf, recvbuf, count, dtype, op}, comm,
                 stream);
  CC_API_GUARD_END
}

CC_API cc_result_t cc_broadcast(const void* sendbuf, void* recvbuf, size_t count,
                                cc_datatype_t dtype, int root, cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  return enqueue({Kind::broadcast, "cc_broadcast", sendbuf, recvbuf, count, dtype, CC_SUM, root},
                 comm, stream);
  CC_API_GUARD_END
}

CC_API cc_result_t cc_reduce(const void* sendbuf, void* recvbuf, size_t count, cc_datatype_t dtype,
                             cc_redop_t op, int root, cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  return enqueue({Kind::reduce, "cc_reduce", sendbuf, recvbuf, count, dtype, op, root}, comm,
                 stream);
  CC_API_GUARD_END
}

CC_API cc_result_t cc_allgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                cc_datatype_t dtype, cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  return enqueue({Kind::allgather, "cc_allgather", sendbuf, recvbuf, sendcount, dtype}, comm,
                 stream);
  CC_API_GUARD_END
}

CC_API cc_result_t cc_reducescatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                    cc_datatype_t dtype, cc_redop_t op, cc_comm_t comm,
                                    cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  return enqueue({Kind::reducescatter, "cc_reducescatter", sendbuf, recvbuf, recvcount, dtype, op},
                 comm, stream);
  CC_API_GUARD_END
}

CC_API cc_result_t cc_alltoall(const void* sendbuf, void* recvbuf, size_t count,
                               cc_datatype_t dtype, cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  return enqueue({Kind::alltoall, "cc_alltoall", sendbuf, recvbuf, count, dtype}, comm, stream);
  CC_API_GUARD_END
}

CC_API cc_result_t cc_send(const void* buf, size_t count, cc_datatype_t dtype, int peer,
                           cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  Collective send{Kind::send, "cc_send", buf, nullptr, count, dtype};
  send.peer = peer;
  return enqueue(send, comm, stream);
  CC_API_GUARD_END
}

CC_API cc_result_t cc_recv(void* buf, size_t count, cc_datatype_t dtype, int peer, cc_comm_t comm,
                           cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  Collective recv{Kind::recv, "cc_recv", nullptr, buf, count, dtype};
  recv.peer = peer;
  return enqueue(recv, comm, stream);
  CC_API_GUARD_END
}

CC_API cc_result_t cc_barrier(cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  return enqueue({Kind::barrier, "cc_barrier"}, comm, stream);
  CC_API_GUARD_END
}

CC_API cc_result_t cc_group_start(void) {
  CC_API_GUARD_BEGIN
  return cc::comm::group_start();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_group_end(void) {
  CC_API_GUARD_BEGIN
  return cc::comm::group_end();
  CC_API_GUARD_END
}

}  // extern "C"
