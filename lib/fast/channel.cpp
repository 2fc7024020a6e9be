#include "lib/fast/channel.hpp"

#include <chrono>
#include <cstdio>
#include <new>
#include <thread>

namespace cc::fast {

struct Channel {
  PeerMemory memory;
  Layout layout;
  DeviceState* state = nullptr;
  unsigned* abort_host = nullptr;    // pinned, mapped
  unsigned* abort_device = nullptr;  // the same word as the GPU sees it
  int rank = 0;
  int nranks = 0;
  int device = 0;
  Plan plan;
  // Recorded after the previous call (unless captured): the next call on
  // another stream waits for it, so two calls never share the buffers.
  cudaEvent_t order = nullptr;       // ours, when the watchdog recorded none
  cudaEvent_t after_last = nullptr;  // recorded after the previous call
  bool recorded = false;
  cudaStream_t last_stream = nullptr;
};

namespace {

// The kernels are built for sm_80 and newer.
constexpr int kMinMajor = 8;

}  // namespace

bool locally_possible(int nranks, int device, std::string* why) {
  if (!kernels_built()) {
    *why = "this libcc was built without them (no nvcc at build time)";
    return false;
  }
  if (nranks < 2 || nranks > kMaxRanks) {
    *why =
        std::to_string(nranks) + " ranks (the kernels take 2 to " + std::to_string(kMaxRanks) + ")";
    return false;
  }
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();
    *why = "the compute capability of device " + std::to_string(device) + " is unknown";
    return false;
  }
  if (major < kMinMajor) {
    *why = "device " + std::to_string(device) + " is older than sm_80";
    return false;
  }
  return true;
}

Channel* prepare(int rank, int nranks, int device, const std::string& host, PeerRecord* record) {
  auto* ch = new (std::nothrow) Channel;
  if (ch == nullptr) {
    *record = PeerRecord{};
    record->rank = rank;
    std::snprintf(record->why, sizeof record->why, "out of host memory");
    return nullptr;
  }
  ch->rank = rank;
  ch->nranks = nranks;
  ch->device = device;
  ch->layout = make_layout(nranks);
  if (!ch->memory.allocate(ch->layout.total, rank, host, record)) {
    destroy(ch);
    return nullptr;
  }
  auto fail = [&](const char* what, cudaError_t e) {
    record->able = 0;
    std::snprintf(record->why, sizeof record->why, "%s failed (%s)", what, cuda_error_text(e).c_str());
    destroy(ch);
    return nullptr;
  };
  void* state = nullptr;
  if (cudaError_t e = cudaMalloc(&state, sizeof(DeviceState)); e != cudaSuccess)
    return fail("cudaMalloc of the device state", e);
  ch->state = static_cast<DeviceState*>(state);
  if (cudaError_t e = cudaMemset(state, 0, sizeof(DeviceState)); e != cudaSuccess)
    return fail("cudaMemset", e);
  void* flag = nullptr;
  if (cudaError_t e = cudaHostAlloc(&flag, sizeof(unsigned), cudaHostAllocMapped); e != cudaSuccess)
    return fail("cudaHostAlloc of the abort flag", e);
  ch->abort_host = static_cast<unsigned*>(flag);
  *ch->abort_host = 0;
  if (cudaError_t e =
          cudaHostGetDevicePointer(reinterpret_cast<void**>(&ch->abort_device), flag, 0);
      e != cudaSuccess)
    return fail("cudaHostGetDevicePointer", e);
  if (cudaError_t e = cudaEventCreateWithFlags(&ch->order, cudaEventDisableTiming);
      e != cudaSuccess)
    return fail("cudaEventCreate", e);
  if (cudaError_t e = load_kernels(); e != cudaSuccess) return fail("loading cc's kernels", e);
  return ch;
}

bool connect(Channel* ch, const std::vector<PeerRecord>& records, std::string* why) {
  if (!ch->memory.open(records, ch->rank, why)) return false;
  DeviceState host{};
  for (int r = 0; r < ch->nranks; ++r) host.buf[r] = ch->memory.peer(r);
  cudaError_t e = cudaMemcpy(ch->state, &host, sizeof host, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    *why = "uploading the peer addresses failed (" + cuda_error_text(e) + ")";
    return false;
  }
  return true;
}

Capacity capacity(const Channel* ch) { return ch->layout.capacity; }

void set_plan(Channel* ch, const Plan& plan) { ch->plan = plan; }
const Plan& plan(const Channel* ch) { return ch->plan; }

void close_peers(Channel* ch) {
  if (ch != nullptr) ch->memory.close_peers();
}

void destroy(Channel* ch) {
  if (ch == nullptr) return;
  ch->memory.release();
  if (ch->order != nullptr) cudaEventDestroy(ch->order);
  if (ch->state != nullptr) cudaFree(ch->state);
  if (ch->abort_host != nullptr) cudaFreeHost(ch->abort_host);
  cudaGetLastError();
  delete ch;
}

bool drain(Channel* ch, long long deadline_ms) {
  if (ch == nullptr || !ch->recorded) return true;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  cudaError_t e;
  while ((e = cudaEventQuery(ch->after_last)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > until) {
      request_abort(ch);
      cudaEventSynchronize(ch->after_last);  // ends within a poll interval now
      cudaGetLastError();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (e != cudaSuccess) cudaGetLastError();
  return e == cudaSuccess;
}

void request_abort(Channel* ch) {
  if (ch == nullptr || ch->abort_host == nullptr) return;
  __atomic_store_n(ch->abort_host, 1u, __ATOMIC_SEQ_CST);
}

cudaError_t allreduce_blocks(Channel* ch, Algo algo, int max_blocks, const void* send, void* recv,
                             size_t count, ncclDataType_t type, ncclRedOp_t op,
                             cudaStream_t stream) {
  KernelArgs args;
  args.state = ch->state;
  args.abort_flag = ch->abort_device;
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.rank = ch->rank;
  args.nranks = ch->nranks;
  args.layout = ch->layout;
  return launch_allreduce(algo, max_blocks, args, type, op, stream);
}

cudaError_t allreduce(Channel* ch, Algo algo, const void* send, void* recv, size_t count,
                      ncclDataType_t type, ncclRedOp_t op, cudaStream_t stream, bool capturing) {
  // Ordered after the previous call when that was on another stream (even
  // one destroyed since): each call records an event, which a call on
  // another stream waits for. Not across a graph capture (an event of eager
  // work cannot join a graph); as with NCCL, work of one communicator must
  // not run on two streams at once there.
  if (ch->recorded && !capturing && stream != ch->last_stream)
    if (cudaError_t e = cudaStreamWaitEvent(stream, ch->after_last, 0); e != cudaSuccess) return e;
  ch->recorded = false;
  ch->last_stream = stream;  // compared, never used: it may be destroyed later
  return allreduce_blocks(ch, algo, ch->plan.blocks, send, recv, count, type, op, stream);
}

void launched(Channel* ch, cudaStream_t stream, bool capturing, cudaEvent_t recorded) {
  if (capturing) return;
  if (recorded == nullptr) {
    if (cudaEventRecord(ch->order, stream) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    recorded = ch->order;
  }
  ch->after_last = recorded;
  ch->recorded = true;
}

}  // namespace cc::fast
