// The collectives: arguments checked before NCCL sees them, then one NCCL
// call on the caller's stream. Hot path: no allocation, no lock, no logging.
#include <chrono>
#include <utility>
#include <vector>

#include <nccl.h>

#include "common/last_error.hpp"
#include "lib/comm/args.hpp"
#include "lib/comm/comm.hpp"
#include "lib/watch/comm_watch.hpp"

namespace cc {
namespace {

using Clock = std::chrono::steady_clock;

// cc's enums carry NCCL's values, so they pass through unchanged.
static_assert(
    CC_INT8 == static_cast<int>(ncclInt8) && CC_UINT8 == static_cast<int>(ncclUint8) &&
    CC_INT32 == static_cast<int>(ncclInt32) && CC_UINT32 == static_cast<int>(ncclUint32) &&
    CC_INT64 == static_cast<int>(ncclInt64) && CC_UINT64 == static_cast<int>(ncclUint64) &&
    CC_FLOAT16 == static_cast<int>(ncclFloat16) && CC_FLOAT32 == static_cast<int>(ncclFloat32) &&
    CC_FLOAT64 == static_cast<int>(ncclFloat64) && CC_BFLOAT16 == static_cast<int>(ncclBfloat16) &&
    CC_FLOAT8_E4M3 == static_cast<int>(ncclFloat8e4m3) &&
    CC_FLOAT8_E5M2 == static_cast<int>(ncclFloat8e5m2));
static_assert(CC_SUM == static_cast<int>(ncclSum) && CC_PROD == static_cast<int>(ncclProd) &&
              CC_MAX == static_cast<int>(ncclMax) && CC_MIN == static_cast<int>(ncclMin) &&
              CC_AVG == static_cast<int>(ncclAvg));

ncclDataType_t to_nccl(cc_datatype_t t) { return static_cast<ncclDataType_t>(t); }
ncclRedOp_t to_nccl(cc_redop_t op) { return static_cast<ncclRedOp_t>(op); }
cudaStream_t to_cuda(cc_stream_t s) { return reinterpret_cast<cudaStream_t>(s); }

// The communicators touched inside this thread's cc_group_start/end.
struct GroupState {
  int depth = 0;
  std::vector<cc_comm*> comms;
};
thread_local GroupState group;

void note_in_group(cc_comm* c) {
  for (cc_comm* g : group.comms)
    if (g == c) return;
  group.comms.push_back(c);
}

args::Caller caller(const char* call, const cc_comm* c) { return {call, c->rank, &c->host}; }

// Runs one NCCL call on a checked communicator and maps the outcome.
// count, dtype and stream describe the operation to the watchdog.
template <class F>
// `capturing` (1/0, -1 unknown) saves the watchdog asking CUDA; `noted`
// receives the event the watchdog recorded after the operation, if any.
cc_result_t run(const char* call, const char* nccl_call, cc_comm* c, size_t count,
                cc_datatype_t dtype, cc_stream_t stream, F&& enqueue, int capturing = -1,
                cudaEvent_t* noted = nullptr) {
  ncclResult_t r;
  {
    CallGuard guard(c);
    if (!comm_usable(c) || c->abort_requested.load(std::memory_order_seq_cst))
      return fail(comm_state_status(call, c));
    r = enqueue();
    if (group.depth > 0) {
      note_in_group(c);
    } else if (r == ncclInProgress) {
      r = nccl_wait_ready(c, c->nccl, Clock::now() + c->timeout);
    }
  }
  const uint64_t seq = c->ops_enqueued.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (c->watch && (r == ncclSuccess || r == ncclInProgress)) {
    const cudaEvent_t e =
        c->watch->note(seq, call, count, dtype, to_cuda(stream), group.depth == 0, capturing);
    if (noted != nullptr) *noted = e;
  }
  if (r == ncclSuccess) return succeed();
  if (r != ncclInProgress) return fail(nccl_failure(nccl_call, c, r));
  if (!comm_usable(c) || c->abort_requested.load()) return fail(comm_state_status(call, c));
  const std::string story = std::string(nccl_call) + " on rank " + std::to_string(c->rank) +
                            " (host " + c->host + ") was not enqueued within " +
                            std::to_string(c->timeout.count()) +
                            " ms; the communicator was aborted. Check that every rank makes "
                            "the same calls, or raise CC_TIMEOUT_MS";
  comm_fail(c, CommState::timed_out, story);
  return fail(CC_ERR_TIMEOUT, call + std::string(": ") + story);
}

#define CC_CHECK(expr)                                                                           \
  do {                                                                                           \
    if (::cc::Status cc_check_st_ = (expr); !cc_check_st_.ok()) return ::cc::fail(cc_check_st_); \
  } while (0)

// cc_send and cc_recv: the same checks, then one NCCL call.
template <class F>
cc_result_t point_to_point(const char* call, const char* nccl_call, const void* buf, size_t count,
                           cc_datatype_t dtype, int peer, cc_comm* comm, cc_stream_t stream,
                           F&& enqueue) {
  CC_CHECK(check_comm_handle(call, comm));
  const auto who = caller(call, comm);
  size_t bytes = 0;
  CC_CHECK(args::check_datatype(who, dtype));
  CC_CHECK(args::check_rank(who, "peer", peer, comm->nranks));
  CC_CHECK(args::check_bytes(who, "count", count, 1, dtype, &bytes));
  CC_CHECK(args::check_buffer(who, "buf", buf, count));
  return run(call, nccl_call, comm, count, dtype, stream, std::forward<F>(enqueue));
}

}  // namespace
}  // namespace cc

using cc::args::check_buffer;
using cc::args::check_bytes;
using cc::args::check_datatype;
using cc::args::check_rank;
using cc::args::check_redop;

extern "C" {

CC_API cc_result_t cc_allreduce(const void* sendbuf, void* recvbuf, size_t count,
                                cc_datatype_t dtype, cc_redop_t op, cc_comm_t comm,
                                cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  const char* call = "cc_allreduce";
  CC_CHECK(cc::check_comm_handle(call, comm));
  const auto who = cc::caller(call, comm);
  size_t bytes = 0;
  CC_CHECK(check_datatype(who, dtype));
  CC_CHECK(check_redop(who, op));
  CC_CHECK(check_bytes(who, "count", count, 1, dtype, &bytes));
  CC_CHECK(check_buffer(who, "sendbuf", sendbuf, count));
  CC_CHECK(check_buffer(who, "recvbuf", recvbuf, count));
  // Small ones through cc's own kernel when the communicator has it (never
  // inside a group: NCCL runs a group's work at cc_group_end).
  if (comm->fast != nullptr && cc::group.depth == 0 &&
      cc::fast::takes(count, cc::to_nccl(dtype), cc::to_nccl(op))) {
    const bool capturing = cc::CommWatch::is_capturing(cc::to_cuda(stream));
    bool launched = false;
    cudaEvent_t noted = nullptr;  // the watchdog's event after it, which orders the next call
    const cc_result_t r = cc::run(
        call, "cc's small all-reduce kernel (CUDA launch)", comm, count, dtype, stream,
        [&] {
          const cudaError_t e =
              cc::fast::allreduce(comm->fast, sendbuf, recvbuf, count, cc::to_nccl(dtype),
                                  cc::to_nccl(op), cc::to_cuda(stream), capturing);
          launched = e == cudaSuccess;
          return launched ? ncclSuccess : ncclUnhandledCudaError;
        },
        capturing ? 1 : 0, &noted);
    if (launched) cc::fast::launched(comm->fast, cc::to_cuda(stream), capturing, noted);
    return r;
  }
  return cc::run(call, "ncclAllReduce", comm, count, dtype, stream, [&] {
    return ncclAllReduce(sendbuf, recvbuf, count, cc::to_nccl(dtype), cc::to_nccl(op), comm->nccl,
                         cc::to_cuda(stream));
  });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_broadcast(const void* sendbuf, void* recvbuf, size_t count,
                                cc_datatype_t dtype, int root, cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  const char* call = "cc_broadcast";
  CC_CHECK(cc::check_comm_handle(call, comm));
  const auto who = cc::caller(call, comm);
  size_t bytes = 0;
  CC_CHECK(check_datatype(who, dtype));
  CC_CHECK(check_rank(who, "root", root, comm->nranks));
  CC_CHECK(check_bytes(who, "count", count, 1, dtype, &bytes));
  if (comm->rank == root) CC_CHECK(check_buffer(who, "sendbuf", sendbuf, count));
  CC_CHECK(check_buffer(who, "recvbuf", recvbuf, count));
  return cc::run(call, "ncclBroadcast", comm, count, dtype, stream, [&] {
    return ncclBroadcast(sendbuf, recvbuf, count, cc::to_nccl(dtype), root, comm->nccl,
                         cc::to_cuda(stream));
  });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_reduce(const void* sendbuf, void* recvbuf, size_t count, cc_datatype_t dtype,
                             cc_redop_t op, int root, cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  const char* call = "cc_reduce";
  CC_CHECK(cc::check_comm_handle(call, comm));
  const auto who = cc::caller(call, comm);
  size_t bytes = 0;
  CC_CHECK(check_datatype(who, dtype));
  CC_CHECK(check_redop(who, op));
  CC_CHECK(check_rank(who, "root", root, comm->nranks));
  CC_CHECK(check_bytes(who, "count", count, 1, dtype, &bytes));
  CC_CHECK(check_buffer(who, "sendbuf", sendbuf, count));
  if (comm->rank == root) CC_CHECK(check_buffer(who, "recvbuf", recvbuf, count));
  return cc::run(call, "ncclReduce", comm, count, dtype, stream, [&] {
    return ncclReduce(sendbuf, recvbuf, count, cc::to_nccl(dtype), cc::to_nccl(op), root,
                      comm->nccl, cc::to_cuda(stream));
  });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_allgather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                cc_datatype_t dtype, cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  const char* call = "cc_allgather";
  CC_CHECK(cc::check_comm_handle(call, comm));
  const auto who = cc::caller(call, comm);
  size_t bytes = 0;
  CC_CHECK(check_datatype(who, dtype));
  CC_CHECK(
      check_bytes(who, "sendcount", sendcount, static_cast<size_t>(comm->nranks), dtype, &bytes));
  CC_CHECK(check_buffer(who, "sendbuf", sendbuf, sendcount));
  CC_CHECK(check_buffer(who, "recvbuf", recvbuf, sendcount * static_cast<size_t>(comm->nranks)));
  return cc::run(call, "ncclAllGather", comm, sendcount, dtype, stream, [&] {
    return ncclAllGather(sendbuf, recvbuf, sendcount, cc::to_nccl(dtype), comm->nccl,
                         cc::to_cuda(stream));
  });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_reducescatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                    cc_datatype_t dtype, cc_redop_t op, cc_comm_t comm,
                                    cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  const char* call = "cc_reducescatter";
  CC_CHECK(cc::check_comm_handle(call, comm));
  const auto who = cc::caller(call, comm);
  size_t bytes = 0;
  CC_CHECK(check_datatype(who, dtype));
  CC_CHECK(check_redop(who, op));
  CC_CHECK(
      check_bytes(who, "recvcount", recvcount, static_cast<size_t>(comm->nranks), dtype, &bytes));
  CC_CHECK(check_buffer(who, "sendbuf", sendbuf, recvcount * static_cast<size_t>(comm->nranks)));
  CC_CHECK(check_buffer(who, "recvbuf", recvbuf, recvcount));
  return cc::run(call, "ncclReduceScatter", comm, recvcount, dtype, stream, [&] {
    return ncclReduceScatter(sendbuf, recvbuf, recvcount, cc::to_nccl(dtype), cc::to_nccl(op),
                             comm->nccl, cc::to_cuda(stream));
  });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_alltoall(const void* sendbuf, void* recvbuf, size_t count,
                               cc_datatype_t dtype, cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  const char* call = "cc_alltoall";
  CC_CHECK(cc::check_comm_handle(call, comm));
  const auto who = cc::caller(call, comm);
  size_t bytes = 0;
  const size_t total = count * static_cast<size_t>(comm->nranks);
  CC_CHECK(check_datatype(who, dtype));
  CC_CHECK(check_bytes(who, "count", count, static_cast<size_t>(comm->nranks), dtype, &bytes));
  CC_CHECK(check_buffer(who, "sendbuf", sendbuf, total));
  CC_CHECK(check_buffer(who, "recvbuf", recvbuf, total));
  if (count > 0 && sendbuf == recvbuf)
    return cc::fail(CC_ERR_INVALID_ARGUMENT, cc::args::who(who) +
                                                 ": sendbuf and recvbuf are the same buffer; "
                                                 "cc_alltoall is not in-place, pass two buffers");
  // Grouped send/recv pairs: the same on every NCCL version.
  const size_t chunk = bytes / static_cast<size_t>(comm->nranks);
  return cc::run(call, "ncclSend/ncclRecv (alltoall)", comm, count, dtype, stream, [&] {
    const auto type = cc::to_nccl(dtype);
    const auto s = cc::to_cuda(stream);
    ncclResult_t r = ncclGroupStart();
    for (int peer = 0; r == ncclSuccess && peer < comm->nranks; ++peer) {
      const size_t offset = chunk * static_cast<size_t>(peer);
      r = ncclSend(static_cast<const char*>(sendbuf) + offset, count, type, peer, comm->nccl, s);
      if (r == ncclSuccess)
        r = ncclRecv(static_cast<char*>(recvbuf) + offset, count, type, peer, comm->nccl, s);
    }
    ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_send(const void* buf, size_t count, cc_datatype_t dtype, int peer,
                           cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  return cc::point_to_point("cc_send", "ncclSend", buf, count, dtype, peer, comm, stream, [&] {
    return ncclSend(buf, count, cc::to_nccl(dtype), peer, comm->nccl, cc::to_cuda(stream));
  });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_recv(void* buf, size_t count, cc_datatype_t dtype, int peer, cc_comm_t comm,
                           cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  return cc::point_to_point("cc_recv", "ncclRecv", buf, count, dtype, peer, comm, stream, [&] {
    return ncclRecv(buf, count, cc::to_nccl(dtype), peer, comm->nccl, cc::to_cuda(stream));
  });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_barrier(cc_comm_t comm, cc_stream_t stream) {
  CC_API_GUARD_BEGIN
  CC_CHECK(cc::check_comm_handle("cc_barrier", comm));
  return cc::run("cc_barrier", "ncclAllReduce (barrier)", comm, 1, CC_INT32, stream, [&] {
    return ncclAllReduce(comm->scratch, comm->scratch, 1, ncclInt32, ncclSum, comm->nccl,
                         cc::to_cuda(stream));
  });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_group_start(void) {
  CC_API_GUARD_BEGIN
  if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess)
    return cc::fail(CC_ERR_NCCL,
                    std::string("cc_group_start: ncclGroupStart failed: ") + ncclGetErrorString(r));
  if (cc::group.depth++ == 0 && cc::group.comms.capacity() == 0) cc::group.comms.reserve(8);
  return cc::succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_group_end(void) {
  CC_API_GUARD_BEGIN
  auto& group = cc::group;
  if (group.depth == 0)
    return cc::fail(CC_ERR_INVALID_USAGE,
                    "cc_group_end: no group is open on this thread; call cc_group_start first");
  if (--group.depth > 0) {
    ncclResult_t r = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress) return cc::succeed();
    return cc::fail(CC_ERR_NCCL,
                    std::string("cc_group_end: ncclGroupEnd failed: ") + ncclGetErrorString(r));
  }
  // The outermost end launches everything: count it as a call on each comm.
  for (cc_comm* c : group.comms) c->calls_in_flight.fetch_add(1, std::memory_order_seq_cst);
  ncclResult_t r = ncclGroupEnd();
  cc_comm* failed = nullptr;
  if (r == ncclInProgress) {
    r = ncclSuccess;
    for (cc_comm* c : group.comms) {
      r = cc::nccl_wait_ready(c, c->nccl, std::chrono::steady_clock::now() + c->timeout);
      if (r != ncclSuccess) {
        failed = c;
        break;
      }
    }
  } else if (r != ncclSuccess && !group.comms.empty()) {
    failed = group.comms.front();
  }
  for (cc_comm* c : group.comms) c->calls_in_flight.fetch_sub(1, std::memory_order_seq_cst);
  group.comms.clear();
  if (r == ncclSuccess) return cc::succeed();
  if (failed == nullptr)
    return cc::fail(CC_ERR_NCCL,
                    std::string("cc_group_end: ncclGroupEnd failed: ") + ncclGetErrorString(r));
  if (!cc::comm_usable(failed) || failed->abort_requested.load())
    return cc::fail(cc::comm_state_status("cc_group_end", failed));
  if (r == ncclInProgress) {
    const std::string story = "the operations of a cc_group_start/cc_group_end on rank " +
                              std::to_string(failed->rank) + " (host " + failed->host +
                              ") were not launched within " +
                              std::to_string(failed->timeout.count()) +
                              " ms; the communicator was aborted. Check that every rank makes "
                              "the same calls, or raise CC_TIMEOUT_MS";
    cc::comm_fail(failed, cc::CommState::timed_out, story);
    return cc::fail(CC_ERR_TIMEOUT, "cc_group_end: " + story);
  }
  return cc::fail(cc::nccl_failure("ncclGroupEnd", failed, r));
  CC_API_GUARD_END
}

}  // extern "C"
