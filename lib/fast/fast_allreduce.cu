// The small-message all-reduce kernel and its set-up (see fast_allreduce.hpp).
#include "lib/fast/fast_allreduce.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <thread>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl_device.h>

namespace cc::fast {
namespace {

// One 8-byte unit per thread; kMaxBytes fills kMaxBlocks blocks.
constexpr int kThreads = 512;
constexpr int kMaxBlocks = static_cast<int>(kMaxBytes / 8 / kThreads);
static_assert(kMaxBlocks * kThreads * 8 == kMaxBytes, "kMaxBytes must fill whole blocks");

// A thread polls the host's abort flag once per this many empty polls of its
// inbox (reading host memory over PCIe is slow; this is well under 1 ms).
constexpr unsigned kPollsPerAbortCheck = 1024;

// The inbox, in NCCL's symmetric memory on every rank: per block, two
// phases (calls alternate, so a fast sender never overwrites what a slow
// receiver still reads), per sender rank, one 16-byte LL line per unit.
__host__ __device__ constexpr size_t line_index(int block, int phase, int sender, int nranks,
                                                int unit) {
  return ((static_cast<size_t>(block) * 2 + phase) * nranks + sender) * kThreads + unit;
}
constexpr size_t inbox_bytes(int nranks) {
  return line_index(kMaxBlocks, 0, 0, nranks, 0) * sizeof(uint4);
}

// What the kernel needs, in device memory: the inbox of every rank as this
// rank reaches it, and per block the number of calls so far (in device
// memory, not a kernel argument, so CUDA graph replays count too).
struct DeviceState {
  uint4* inbox[kMaxRanks];
  unsigned long long calls[kMaxBlocks];
};

__global__ void resolve_inboxes(ncclDevComm dev, ncclDevResourceHandle_t handle,
                                DeviceState* state) {
  const int r = static_cast<int>(threadIdx.x);
  if (r < dev.lsaSize && r < kMaxRanks)
    state->inbox[r] = static_cast<uint4*>(ncclGetResourceBufferLsaPointer(dev, handle, r));
}

__global__ void zero_lines(uint4* lines, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    lines[i] = uint4{0, 0, 0, 0};
}

// ---- element arithmetic ---------------------------------------------------

template <class T>
struct Acc {
  using type = T;
};
template <>
struct Acc<__half> {
  using type = float;
};
template <>
struct Acc<__nv_bfloat16> {
  using type = float;
};

template <class T>
__device__ typename Acc<T>::type widen(T v) {
  return v;
}
template <>
__device__ float widen<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ float widen<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <class T>
__device__ T narrow(typename Acc<T>::type v) {
  return v;
}
template <>
__device__ __half narrow<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

struct OpSum {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
struct OpProd {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return a * b;
  }
};
struct OpMax {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return a < b ? b : a;
  }
};
struct OpMin {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return b < a ? b : a;
  }
};
struct OpAvg {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

// Eight bytes of T.
template <class T>
struct Unit {
  static constexpr int kPer = 8 / sizeof(T);
  T v[kPer];
};

template <class T>
__device__ uint2 to_bits(const Unit<T>& u) {
  uint2 b;
  memcpy(&b, &u, 8);
  return b;
}
template <class T>
__device__ Unit<T> from_bits(uint2 b) {
  Unit<T> u;
  memcpy(&u, &b, 8);
  return u;
}

// ---- the kernel -----------------------------------------------------------

// Thread t of block b owns unit b*kThreads+t: elements [unit*kPer, +kPer).
// It sends its unit to every peer's inbox, then combines the units of ranks
// 0..n-1 in that order (the same arithmetic on every rank) and writes its
// share of recv. Buffers of any alignment: a unit is copied element-wise
// when it is not 8-byte aligned or runs past count.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    allreduce_kernel(DeviceState* state, int rank, int nranks, const volatile unsigned* abort_flag,
                     const T* send, T* recv, size_t count) {
  constexpr int kPer = Unit<T>::kPer;
  const unsigned long long call = state->calls[blockIdx.x] + 1;
  const unsigned flag = static_cast<unsigned>(call) | (static_cast<unsigned>(call) == 0u);
  const int phase = static_cast<int>(call & 1);
  const size_t unit = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  const size_t first = unit * kPer;
  const bool active = first < count;
  const bool whole = active && first + kPer <= count;

  Unit<T> mine{};
  if (whole && (reinterpret_cast<uintptr_t>(send + first) & 7) == 0) {
    mine = *reinterpret_cast<const Unit<T>*>(send + first);
  } else if (active) {
    for (int k = 0; k < kPer && first + k < count; ++k) mine.v[k] = send[first + k];
  }

  bool aborted = false;
  if (active) {
    const uint2 bits = to_bits(mine);
    for (int p = 0; p < nranks; ++p) {
      if (p == rank) continue;
      uint4* line = state->inbox[p] + line_index(blockIdx.x, phase, rank, nranks, threadIdx.x);
      asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(line), "r"(bits.x),
                   "r"(flag), "r"(bits.y), "r"(flag)
                   : "memory");
    }

    using A = typename Acc<T>::type;
    A acc[kPer];
    const Op op;
    for (int r = 0; r < nranks && !aborted; ++r) {
      Unit<T> theirs;
      if (r == rank) {
        theirs = mine;
      } else {
        const uint4* line =
            state->inbox[rank] + line_index(blockIdx.x, phase, r, nranks, threadIdx.x);
        uint4 got;
        unsigned polls = 0;
        while (true) {
          asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(got.x), "=r"(got.y), "=r"(got.z), "=r"(got.w)
                       : "l"(line)
                       : "memory");
          if (got.y == flag && got.w == flag) break;
          if (++polls == kPollsPerAbortCheck) {
            polls = 0;
            if (*abort_flag != 0) {
              aborted = true;
              break;
            }
          }
        }
        theirs = from_bits<T>(make_uint2(got.x, got.z));
      }
      for (int k = 0; k < kPer; ++k) {
        const A v = widen<T>(theirs.v[k]);
        acc[k] = r == 0 ? v : op(acc[k], v);
      }
    }

    if (!aborted) {
      Unit<T> out;
      for (int k = 0; k < kPer; ++k) {
        if constexpr (std::is_same_v<Op, OpAvg>) acc[k] = acc[k] / static_cast<A>(nranks);
        out.v[k] = narrow<T>(acc[k]);
      }
      if (whole && (reinterpret_cast<uintptr_t>(recv + first) & 7) == 0) {
        *reinterpret_cast<Unit<T>*>(recv + first) = out;
      } else {
        for (int k = 0; k < kPer && first + k < count; ++k) recv[first + k] = out.v[k];
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) state->calls[blockIdx.x] = call;
}

template <class T, class Op>
cudaError_t launch_typed(DeviceState* state, int rank, int nranks, const unsigned* abort_flag,
                         const void* send, void* recv, size_t count, cudaStream_t stream) {
  const size_t units = (count + Unit<T>::kPer - 1) / Unit<T>::kPer;
  const unsigned blocks = static_cast<unsigned>((units + kThreads - 1) / kThreads);
  allreduce_kernel<T, Op><<<blocks, kThreads, 0, stream>>>(
      state, rank, nranks, abort_flag, static_cast<const T*>(send), static_cast<T*>(recv), count);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_op(ncclRedOp_t op, DeviceState* state, int rank, int nranks,
                      const unsigned* abort_flag, const void* send, void* recv, size_t count,
                      cudaStream_t stream) {
  switch (op) {
    case ncclSum:
      return launch_typed<T, OpSum>(state, rank, nranks, abort_flag, send, recv, count, stream);
    case ncclProd:
      return launch_typed<T, OpProd>(state, rank, nranks, abort_flag, send, recv, count, stream);
    case ncclMax:
      return launch_typed<T, OpMax>(state, rank, nranks, abort_flag, send, recv, count, stream);
    case ncclMin:
      return launch_typed<T, OpMin>(state, rank, nranks, abort_flag, send, recv, count, stream);
    case ncclAvg:
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, __half> ||
                    std::is_same_v<T, __nv_bfloat16>)
        return launch_typed<T, OpAvg>(state, rank, nranks, abort_flag, send, recv, count, stream);
      return cudaErrorNotSupported;
    default:
      return cudaErrorNotSupported;
  }
}

bool is_float_type(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}

// The kernels are built for sm_80 and newer (NVLink peers with LSA).
constexpr int kMinMajor = 8;

}  // namespace

struct Channel {
  ncclDevComm dev{};
  ncclDevResourceHandle_t inbox = 0;
  DeviceState* state = nullptr;
  unsigned* abort_host = nullptr;    // pinned, mapped
  unsigned* abort_device = nullptr;  // the same word as the GPU sees it
  int rank = 0;
  int nranks = 0;
  int device = 0;
  // Recorded after the previous call (unless captured): the next call waits
  // for it, so two calls never share the inbox at once.
  cudaEvent_t order = nullptr;       // ours, when the watchdog recorded none
  cudaEvent_t after_last = nullptr;  // recorded after the previous call
  bool recorded = false;
  cudaStream_t last_stream = nullptr;
};

bool locally_possible(int nranks, int device, std::string* why) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) version = 0;
  if (version != NCCL_VERSION_CODE) {
    *why = "the NCCL loaded (" + std::to_string(version) + ") is not the one cc was built with (" +
           std::to_string(NCCL_VERSION_CODE) + "), and the device API's structures are compiled in";
    return false;
  }
  if (nranks < 2 || nranks > kMaxRanks) {
    *why =
        std::to_string(nranks) + " ranks (the kernel takes 2 to " + std::to_string(kMaxRanks) + ")";
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

Channel* create(ncclComm_t nccl, int device, std::string* why) {
  auto* ch = new (std::nothrow) Channel;
  if (ch == nullptr) {
    *why = "out of host memory";
    return nullptr;
  }
  ch->device = device;
  ncclDevResourceRequirements_t res;
  std::memset(&res, 0, sizeof res);
  res.bufferSize = 0;  // set below, once the rank count is known
  ncclDevCommRequirements_t reqs;
  std::memset(&reqs, 0, sizeof reqs);
  int nranks = 0;
  if (ncclCommCount(nccl, &nranks) != ncclSuccess || nranks > kMaxRanks) {
    *why = "could not read the rank count";
    delete ch;
    return nullptr;
  }
  res.bufferSize = inbox_bytes(nranks);
  res.bufferAlign = 4096;
  res.outBufferHandle = &ch->inbox;
  reqs.resourceRequirementsList = &res;
  if (ncclResult_t r = ncclDevCommCreate(nccl, &reqs, &ch->dev); r != ncclSuccess) {
    *why = std::string("ncclDevCommCreate failed: ") + ncclGetErrorString(r);
    const char* last = ncclGetLastError(nccl);
    if (last != nullptr && *last != '\0') *why += std::string(": ") + last;
    delete ch;
    return nullptr;
  }
  ch->rank = ch->dev.lsaRank;
  ch->nranks = ch->dev.lsaSize;
  auto give_up = [&](std::string text) {
    *why = std::move(text);
    destroy(ch);
    return nullptr;
  };
  if (ch->dev.lsaSize != ch->dev.nRanks)
    return give_up("only " + std::to_string(ch->dev.lsaSize) + " of the " +
                   std::to_string(ch->dev.nRanks) +
                   " ranks are load/store reachable (more than one NVLink domain)");
  void* state = nullptr;
  cudaError_t e = cudaMalloc(&state, sizeof(DeviceState));
  if (e == cudaSuccess) {
    ch->state = static_cast<DeviceState*>(state);
    e = cudaMemset(state, 0, sizeof(DeviceState));
  }
  void* flag = nullptr;
  if (e == cudaSuccess) e = cudaHostAlloc(&flag, sizeof(unsigned), cudaHostAllocMapped);
  if (e == cudaSuccess) {
    ch->abort_host = static_cast<unsigned*>(flag);
    *ch->abort_host = 0;
    e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&ch->abort_device), flag, 0);
  }
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ch->order, cudaEventDisableTiming);
  if (e == cudaSuccess) {
    resolve_inboxes<<<1, kMaxRanks>>>(ch->dev, ch->inbox, ch->state);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    cudaGetLastError();
    return give_up(std::string("CUDA: ") + cudaGetErrorString(e));
  }
  return ch;
}

cudaError_t clear_inbox(Channel* ch, cudaStream_t stream) {
  // This rank's own inbox, as reached through the state the kernel uses.
  uint4* mine = nullptr;
  cudaError_t e =
      cudaMemcpy(&mine, &ch->state->inbox[ch->rank], sizeof mine, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return e;
  zero_lines<<<64, 256, 0, stream>>>(mine, inbox_bytes(ch->nranks) / sizeof(uint4));
  return cudaGetLastError();
}

void destroy(Channel* ch) {
  if (ch == nullptr) return;
  if (ch->order != nullptr) cudaEventDestroy(ch->order);
  if (ch->state != nullptr) cudaFree(ch->state);
  if (ch->abort_host != nullptr) cudaFreeHost(ch->abort_host);
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

bool takes(size_t count, ncclDataType_t type, ncclRedOp_t op) {
  size_t size = 0;
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      size = 1;
      break;
    case ncclFloat16:
    case ncclBfloat16:
      size = 2;
      break;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      size = 4;
      break;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      size = 8;
      break;
    default:
      return false;  // the float8 types and anything newer: NCCL
  }
  if (count == 0 || count > kMaxBytes / size) return false;
  if (op == ncclAvg) return is_float_type(type);
  return op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin;
}

cudaError_t allreduce(Channel* ch, const void* send, void* recv, size_t count, ncclDataType_t type,
                      ncclRedOp_t op, cudaStream_t stream, bool capturing) {
  // Ordered after the previous call when that was on another stream (even
  // one destroyed since): each call records an event, which a call on
  // another stream waits for. Not across a graph capture (an event of eager
  // work cannot join a graph); as with NCCL, work of one communicator must
  // not run on two streams at once there.
  if (ch->recorded && !capturing && stream != ch->last_stream)
    if (cudaError_t e = cudaStreamWaitEvent(stream, ch->after_last, 0); e != cudaSuccess) return e;
  ch->recorded = false;
  ch->last_stream = stream;  // compared, never used: it may be destroyed later
  DeviceState* s = ch->state;
  const int rank = ch->rank, n = ch->nranks;
  const unsigned* flag = ch->abort_device;
  cudaError_t e = cudaSuccess;
  switch (type) {
    case ncclInt8:
      e = launch_op<int8_t>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    case ncclUint8:
      e = launch_op<uint8_t>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    case ncclInt32:
      e = launch_op<int32_t>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    case ncclUint32:
      e = launch_op<uint32_t>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    case ncclInt64:
      e = launch_op<int64_t>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    case ncclUint64:
      e = launch_op<uint64_t>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    case ncclFloat16:
      e = launch_op<__half>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    case ncclBfloat16:
      e = launch_op<__nv_bfloat16>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    case ncclFloat32:
      e = launch_op<float>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    case ncclFloat64:
      e = launch_op<double>(op, s, rank, n, flag, send, recv, count, stream);
      break;
    default:
      e = cudaErrorNotSupported;
  }
  return e;
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
