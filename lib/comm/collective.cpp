#include "lib/comm/collective.hpp"

#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include <nccl.h>

#include "common/call_desc.hpp"
#include "common/datatypes.hpp"
#include "common/last_error.hpp"
#include "common/return_if_error.hpp"
#include "lib/comm/args.hpp"
#include "lib/comm/handle.hpp"
#include "lib/core/graphs.hpp"
#include "lib/watch/comm_watch.hpp"

namespace cc::comm {
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

// A call NCCL did not take within the deadline: the communicator is aborted
// and every later call says why.
cc_result_t enqueue_timed_out(const char* call, const std::string& what, cc_comm* c) {
  const std::string story = what + " on " + c->who() + " " +
                            (what.rfind("the operations", 0) == 0 ? "were" : "was") +
                            " not launched within " + std::to_string(c->timeout.count()) +
                            " ms; the communicator was aborted. Check that every rank makes "
                            "the same calls, or raise CC_TIMEOUT_MS";
  core::fail(*c, core::State::timed_out, story);
  return fail(CC_ERR_TIMEOUT, std::string(call) + ": " + story);
}

int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The call as the ranks must agree on it (common/call_desc.hpp). In place
// as NCCL means it: an all-gather's input is this rank's slice of the
// output, a reduce-scatter's output this rank's slice of the input.
CallDesc describe(const Collective& coll, const cc_comm* c) {
  CallDesc d;
  d.kind = coll.kind;
  d.count = coll.count;
  const Kind k = coll.kind;
  if (k == Kind::barrier) return d;
  d.dtype = static_cast<int32_t>(coll.dtype);
  if (k == Kind::allreduce || k == Kind::reduce || k == Kind::reducescatter)
    d.op = static_cast<int32_t>(coll.op);
  if (k == Kind::broadcast || k == Kind::reduce) d.root = coll.root;
  if (k == Kind::send || k == Kind::recv) {
    d.root = coll.peer;
    return d;
  }
  const size_t slice = coll.count * datatype_size(coll.dtype) * static_cast<size_t>(c->rank);
  const char* send = static_cast<const char*>(coll.send);
  const char* recv = static_cast<const char*>(coll.recv);
  if (k == Kind::allgather)
    d.in_place = send != nullptr && recv != nullptr && send == recv + slice;
  else if (k == Kind::reducescatter)
    d.in_place = send != nullptr && recv != nullptr && recv == send + slice;
  else if (k != Kind::alltoall)
    d.in_place = send != nullptr && send == recv;
  return d;
}

// How long a call whose NCCL reported a remote error waits for the verdict
// that names the rank (the watchdog sees the same error at its next look).
constexpr std::chrono::milliseconds kRemoteVerdictGrace{500};

// NCCL's error message for a failed call, or, when the failure is a peer's (NCCL's
// remote error: its process exited or its network went away), the
// verdict's: CC_ERR_PEER_FAILED, which the survivors recover from, naming
// the rank once the watchdog or the rendezvous has, NCCL's error message before.
Status failure_of(const char* call, const char* nccl_call, const cc_comm* c, ncclResult_t r) {
  if (r != ncclRemoteError) return core::nccl_failure(nccl_call, *c, r);
  const auto until = Clock::now() + kRemoteVerdictGrace;
  while (core::usable(*c) && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!core::usable(*c)) return core::state_status(call, *c);
  Status st = core::nccl_failure(nccl_call, *c, r);
  st.code = CC_ERR_PEER_FAILED;
  return st;
}

// Runs one NCCL call on a checked communicator and maps the outcome.
// `known`: whether `stream` captures, when the caller asked already (else
// asked here, once per call); `noted` receives the event the watchdog
// recorded after the operation, if any.
template <class F>
cc_result_t run(const Collective& coll, const char* nccl_call, cc_comm* c, cc_stream_t stream,
                F&& launch, const core::Capture* known = nullptr, cudaEvent_t* noted = nullptr) {
  ncclResult_t r;
  core::Capture capture;
  {
    core::CallGuard guard(*c);
    if (!core::usable(*c) || c->abort_requested.load(std::memory_order_seq_cst))
      return fail(core::state_status(coll.call, *c));
    capture = known != nullptr ? *known : core::capture_of(to_cuda(stream));
    // A graph that captures this call holds the communicator in NCCL until
    // it is destroyed: counted, with the check on or off.
    if (capture.graph != nullptr) c->graphs.note(capture);
    // Recorded before the launch, so a rank stuck in it reports this call.
    if (c->recorder) {
      const CallDesc call = describe(coll, c);
      // A call captured into a CUDA graph: the graph counts its replays.
      if (c->graph_replays && capture.graph != nullptr)
        c->graph_replays->note(to_cuda(stream), capture, call);
      c->recorder->calls().record(call, c->ops_enqueued.load(std::memory_order_relaxed) + 1,
                                  reinterpret_cast<uintptr_t>(stream), wall_clock_us());
    }
    r = launch();
    if (group.depth > 0) {
      note_in_group(c);
    } else if (r == ncclInProgress) {
      r = core::wait_ready(*c, c->nccl, Clock::now() + c->timeout);
    }
  }
  const uint64_t seq = c->ops_enqueued.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (c->watch && (r == ncclSuccess || r == ncclInProgress)) {
    const cudaEvent_t e = c->watch->note(seq, coll.call, coll.count, coll.dtype, to_cuda(stream),
                                         group.depth == 0, capture.captures());
    if (noted != nullptr) *noted = e;
  }
  if (r == ncclSuccess) return succeed();
  // A verdict (a peer's death, a mismatch, the deadline) explains an NCCL
  // error that comes with it: the peers' aborts reach this rank over NCCL's
  // sockets as an "internal error", which says nothing of the cause.
  if (!core::usable(*c) || c->abort_requested.load())
    return fail(core::state_status(coll.call, *c));
  if (r != ncclInProgress) return fail(failure_of(coll.call, nccl_call, c, r));
  return enqueue_timed_out(coll.call, nccl_call, c);
}

// The checks every kind shares, in the order the message names them.
Status check(const Collective& coll, const cc_comm* c) {
  const args::Caller who{coll.call, c->rank, &c->host, c->pid,
                         c->generation > 0 ? static_cast<int>(c->generation) : -1};
  const Kind k = coll.kind;
  if (k == Kind::barrier) return Status::success();
  const bool reduces = k == Kind::allreduce || k == Kind::reduce || k == Kind::reducescatter;
  const bool rooted = k == Kind::broadcast || k == Kind::reduce;
  const bool p2p = k == Kind::send || k == Kind::recv;
  const size_t n = static_cast<size_t>(c->nranks);
  const bool per_rank = k == Kind::allgather || k == Kind::reducescatter || k == Kind::alltoall;
  const char* count_name = k == Kind::allgather       ? "sendcount"
                           : k == Kind::reducescatter ? "recvcount"
                                                      : "count";
  size_t bytes = 0;
  CC_RETURN_IF_ERROR(args::check_datatype(who, coll.dtype));
  if (reduces) CC_RETURN_IF_ERROR(args::check_redop(who, coll.op));
  if (rooted) CC_RETURN_IF_ERROR(args::check_rank(who, "root", coll.root, c->nranks));
  if (p2p) CC_RETURN_IF_ERROR(args::check_rank(who, "peer", coll.peer, c->nranks));
  if (Status st =
          args::check_bytes(who, count_name, coll.count, per_rank ? n : 1, coll.dtype, &bytes);
      !st.ok())
    return st;

  // How many elements each buffer holds, and whether this rank uses it.
  size_t send_count = coll.count, recv_count = coll.count;
  bool uses_send = true, uses_recv = true;
  switch (k) {
    case Kind::broadcast:
      uses_send = c->rank == coll.root;
      break;
    case Kind::reduce:
      uses_recv = c->rank == coll.root;
      break;
    case Kind::allgather:
      recv_count = coll.count * n;
      break;
    case Kind::reducescatter:
      send_count = coll.count * n;
      break;
    case Kind::alltoall:
      send_count = recv_count = coll.count * n;
      break;
    case Kind::send:
      uses_recv = false;
      break;
    case Kind::recv:
      uses_send = false;
      break;
    default:
      break;
  }
  if (p2p) {
    const void* buf = k == Kind::send ? coll.send : coll.recv;
    return args::check_buffer(who, "buf", buf, coll.count);
  }
  if (uses_send) CC_RETURN_IF_ERROR(args::check_buffer(who, "sendbuf", coll.send, send_count));
  if (uses_recv) CC_RETURN_IF_ERROR(args::check_buffer(who, "recvbuf", coll.recv, recv_count));
  if (k == Kind::alltoall && coll.count > 0 && coll.send == coll.recv)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       args::who(who) +
                           ": sendbuf and recvbuf are the same buffer; cc_alltoall is not "
                           "in-place, pass two buffers");
  return Status::success();
}

// An all-reduce through the cc kernel `algo` the plan chose (never inside a
// group: NCCL runs a group's work at cc_group_end).
cc_result_t fast_allreduce(const Collective& coll, cc_comm* c, cc_stream_t stream,
                           fast::Algo algo) {
  const core::Capture capture = core::capture_of(to_cuda(stream));
  const bool capturing = capture.captures();
  bool launched = false;
  cudaEvent_t noted = nullptr;  // the watchdog's event after it, which orders the next call
  const cc_result_t r = run(
      coll, "cc's all-reduce kernel (CUDA launch)", c, stream,
      [&] {
        const cudaError_t e =
            fast::allreduce(c->fast, algo, coll.send, coll.recv, coll.count, to_nccl(coll.dtype),
                            to_nccl(coll.op), to_cuda(stream), capturing);
        launched = e == cudaSuccess;
        return launched ? ncclSuccess : ncclUnhandledCudaError;
      },
      &capture, &noted);
  if (launched) fast::launched(c->fast, to_cuda(stream), capturing, noted);
  return r;
}

// Grouped send/recv pairs: the same on every NCCL version.
ncclResult_t alltoall(const Collective& coll, cc_comm* c, cudaStream_t s) {
  const size_t chunk = coll.count * datatype_size(coll.dtype);
  ncclResult_t r = ncclGroupStart();
  for (int peer = 0; r == ncclSuccess && peer < c->nranks; ++peer) {
    const size_t offset = chunk * static_cast<size_t>(peer);
    r = ncclSend(static_cast<const char*>(coll.send) + offset, coll.count, to_nccl(coll.dtype),
                 peer, c->nccl, s);
    if (r == ncclSuccess)
      r = ncclRecv(static_cast<char*>(coll.recv) + offset, coll.count, to_nccl(coll.dtype), peer,
                   c->nccl, s);
  }
  ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

// A reduction over one rank is its input, whatever the op: a copy when out
// of place. NCCL is not asked: on one rank it refuses an average of fp8
// values, and 2.28.3 leaves the tail of an out-of-place average of
// 1048579 floats unwritten.
cc_result_t single_rank_reduction(const Collective& coll, cc_comm* c, cc_stream_t stream) {
  const size_t bytes = coll.count * datatype_size(coll.dtype);
  return run(coll, "cudaMemcpyAsync (a reduction over one rank)", c, stream, [&] {
    if (bytes == 0 || coll.send == coll.recv) return ncclSuccess;
    const cudaError_t e = cudaMemcpyAsync(coll.recv, coll.send, bytes, cudaMemcpyDeviceToDevice,
                                          to_cuda(stream));
    if (e == cudaSuccess) return ncclSuccess;
    (void)cudaGetLastError();
    return ncclUnhandledCudaError;
  });
}

}  // namespace

cc_result_t enqueue(const Collective& coll, cc_comm* c, cc_stream_t stream) {
  if (Status st = check_handle(coll.call, c); !st.ok()) return fail(st);
  if (Status st = check(coll, c); !st.ok()) return fail(st);
  const cudaStream_t s = to_cuda(stream);
  const ncclDataType_t type = to_nccl(coll.dtype);
  const ncclRedOp_t op = to_nccl(coll.op);
  if (c->nranks == 1 && (coll.kind == Kind::allreduce || coll.kind == Kind::reduce ||
                         coll.kind == Kind::reducescatter))
    return single_rank_reduction(coll, c, stream);
  switch (coll.kind) {
    case Kind::allreduce:
      if (group.depth == 0)
        if (const fast::Algo algo = fast::choose(c->fast, coll.count, type, op);
            algo != fast::Algo::nccl)
          return fast_allreduce(coll, c, stream, algo);
      return run(coll, "ncclAllReduce", c, stream, [&] {
        return ncclAllReduce(coll.send, coll.recv, coll.count, type, op, c->nccl, s);
      });
    case Kind::broadcast:
      return run(coll, "ncclBroadcast", c, stream, [&] {
        return ncclBroadcast(coll.send, coll.recv, coll.count, type, coll.root, c->nccl, s);
      });
    case Kind::reduce:
      return run(coll, "ncclReduce", c, stream, [&] {
        return ncclReduce(coll.send, coll.recv, coll.count, type, op, coll.root, c->nccl, s);
      });
    case Kind::allgather:
      return run(coll, "ncclAllGather", c, stream,
                 [&] { return ncclAllGather(coll.send, coll.recv, coll.count, type, c->nccl, s); });
    case Kind::reducescatter:
      return run(coll, "ncclReduceScatter", c, stream, [&] {
        return ncclReduceScatter(coll.send, coll.recv, coll.count, type, op, c->nccl, s);
      });
    case Kind::alltoall:
      return run(coll, "ncclSend/ncclRecv (alltoall)", c, stream,
                 [&] { return alltoall(coll, c, s); });
    case Kind::send:
      return run(coll, "ncclSend", c, stream,
                 [&] { return ncclSend(coll.send, coll.count, type, coll.peer, c->nccl, s); });
    case Kind::recv:
      return run(coll, "ncclRecv", c, stream,
                 [&] { return ncclRecv(coll.recv, coll.count, type, coll.peer, c->nccl, s); });
    case Kind::barrier:
      return run(coll, "ncclAllReduce (barrier)", c, stream, [&] {
        return ncclAllReduce(c->scratch, c->scratch, 1, ncclInt32, ncclSum, c->nccl, s);
      });
  }
  return fail(CC_ERR_INTERNAL, std::string(coll.call) + ": unknown kind of collective");
}

cc_result_t group_start() {
  if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess)
    return fail(CC_ERR_NCCL,
                std::string("cc_group_start: ncclGroupStart failed: ") + ncclGetErrorString(r));
  if (group.depth++ == 0 && group.comms.capacity() == 0) group.comms.reserve(8);
  return succeed();
}

cc_result_t group_end() {
  if (group.depth == 0)
    return fail(CC_ERR_INVALID_USAGE,
                "cc_group_end: no group is open on this thread; call cc_group_start first");
  if (--group.depth > 0) {
    ncclResult_t r = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress) return succeed();
    return fail(CC_ERR_NCCL,
                std::string("cc_group_end: ncclGroupEnd failed: ") + ncclGetErrorString(r));
  }
  // The outermost end launches everything: count it as a call on each comm.
  for (cc_comm* c : group.comms) c->calls_in_flight.fetch_add(1, std::memory_order_seq_cst);
  ncclResult_t r = ncclGroupEnd();
  cc_comm* failed = nullptr;
  if (r == ncclInProgress) {
    r = ncclSuccess;
    for (cc_comm* c : group.comms) {
      r = core::wait_ready(*c, c->nccl, Clock::now() + c->timeout);
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
  if (r == ncclSuccess) return succeed();
  if (failed == nullptr)
    return fail(CC_ERR_NCCL,
                std::string("cc_group_end: ncclGroupEnd failed: ") + ncclGetErrorString(r));
  if (!core::usable(*failed) || failed->abort_requested.load())
    return fail(core::state_status("cc_group_end", *failed));
  if (r == ncclInProgress)
    return enqueue_timed_out("cc_group_end", "the operations of a cc_group_start/cc_group_end",
                             failed);
  return fail(failure_of("cc_group_end", "ncclGroupEnd", failed, r));
}

}  // namespace cc::comm
