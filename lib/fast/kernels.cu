// cc's all-reduce kernels (see kernels.hpp for the protocol).
#include "lib/fast/kernels.hpp"

#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace cc::fast {
namespace {

// A thread polls the host's abort flag once per this many empty polls
// (a read of mapped host memory crosses PCIe; this is well under 1 ms).
constexpr unsigned kPollsPerAbortCheck = 1024;
constexpr size_t kChunkPacks = kChunkBytes / 16;

enum OpKind : int { kSum, kProd, kMax, kMin, kAvg };

// ---- memory operations ------------------------------------------------------

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void st_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void st_volatile_line(uint4* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ uint4 ld_volatile_line(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// The flag value of call `seq`: never 0 (the cleared state).
__device__ __forceinline__ uint32_t flag_of(unsigned long long seq) {
  const uint32_t f = static_cast<uint32_t>(seq);
  return f == 0 ? 1u : f;
}

__device__ __forceinline__ uint32_t* flag_at(char* buf, const Layout& l, int phase, int step,
                                             int sender, int chunk) {
  return reinterpret_cast<uint32_t*>(buf + l.flags_off) +
         ((static_cast<size_t>(phase) * 2 + step) * kMaxRanks + sender) * kMaxChunks + chunk;
}

// ---- element arithmetic -----------------------------------------------------
// Half and bfloat16 compute in float and round after every operation, which
// for two operands is the correctly rounded result, as NCCL's own arithmetic.

template <class T>
struct Wide {
  using type = T;
};
template <>
struct Wide<__half> {
  using type = float;
};
template <>
struct Wide<__nv_bfloat16> {
  using type = float;
};

template <class T>
__device__ __forceinline__ typename Wide<T>::type widen(T v) {
  return v;
}
template <>
__device__ __forceinline__ float widen<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float widen<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <class T>
__device__ __forceinline__ T narrow(typename Wide<T>::type v) {
  return v;
}
template <>
__device__ __forceinline__ __half narrow<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <class T, int OP>
__device__ __forceinline__ T combine(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Integer sums and products wrap, as NCCL's do (unsigned: no overflow UB).
    using U = std::make_unsigned_t<T>;
    if constexpr (OP == kSum)
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    if constexpr (OP == kProd)
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    if constexpr (OP == kMax) return a < b ? b : a;
    return b < a ? b : a;
  } else {
    using W = typename Wide<T>::type;
    const W x = widen<T>(a), y = widen<T>(b);
    if constexpr (OP == kSum || OP == kAvg) return narrow<T>(x + y);
    if constexpr (OP == kProd) return narrow<T>(x * y);
    if constexpr (OP == kMax) return narrow<T>(x < y ? y : x);
    return narrow<T>(y < x ? y : x);
  }
}

// Average as NCCL computes it for floating types: each input times 1/n
// (rounded to T), then the sum.
template <class T, int OP>
__device__ __forceinline__ T prepare(T v, int nranks) {
  if constexpr (OP == kAvg) {
    using W = typename Wide<T>::type;
    const T inv = narrow<T>(static_cast<W>(1.0 / nranks));
    return narrow<T>(widen<T>(v) * widen<T>(inv));
  } else {
    return v;
  }
}

// ---- 16-byte packs of T --------------------------------------------------------

template <class T>
struct Pack {
  static constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  T v[kPer];
};

template <class T>
__device__ __forceinline__ Pack<T> unpack(uint4 bits) {
  Pack<T> p;
  memcpy(&p, &bits, 16);
  return p;
}
template <class T>
__device__ __forceinline__ uint4 bits_of(const Pack<T>& p) {
  uint4 b;
  memcpy(&b, &p, 16);
  return b;
}

// Pack j of a user buffer: one 16-byte access when the buffer is aligned and
// the pack whole, else element by element (elements past count read as 0).
template <class T>
__device__ __forceinline__ uint4 load_pack(const T* base, size_t j, size_t count, bool aligned) {
  constexpr int kPer = Pack<T>::kPer;
  const size_t first = j * kPer;
  if (aligned && first + kPer <= count) return *reinterpret_cast<const uint4*>(base + first);
  Pack<T> p;
#pragma unroll
  for (int k = 0; k < kPer; ++k) p.v[k] = first + k < count ? base[first + k] : T{};
  return bits_of(p);
}

template <class T>
__device__ __forceinline__ void store_pack(T* base, size_t j, size_t count, bool aligned,
                                           uint4 bits) {
  constexpr int kPer = Pack<T>::kPer;
  const size_t first = j * kPer;
  if (aligned && first + kPer <= count) {
    *reinterpret_cast<uint4*>(base + first) = bits;
    return;
  }
  const Pack<T> p = unpack<T>(bits);
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (first + k < count) base[first + k] = p.v[k];
}

template <class T, int OP>
__device__ __forceinline__ void fold(Pack<T>& acc, uint4 bits, bool first, int nranks) {
  Pack<T> x = unpack<T>(bits);
#pragma unroll
  for (int k = 0; k < Pack<T>::kPer; ++k) {
    const T v = prepare<T, OP>(x.v[k], nranks);
    acc.v[k] = first ? v : combine<T, OP>(acc.v[k], v);
  }
}

// ---- block-level signalling -------------------------------------------------------

// Called by the whole block after its stores to peers: threads 0..n-1 each
// tell one peer that this block's stores of (phase, step, chunk) are there,
// with a release store at system scope (the barrier first makes the whole
// block's stores part of what it releases; NCCL posts its steps the same
// way). `to(q)` says whether peer q is told; with `self`, thread `rank`
// also flags this rank's own slot (at GPU scope), for blocks of this rank
// that must wait until this block has read its part of the input.
template <class To>
__device__ __forceinline__ void signal_peers(const KernelArgs& a, int phase, int step, int chunk,
                                             uint32_t flag, To to, bool self = false) {
  __syncthreads();
  const int q = static_cast<int>(threadIdx.x);
  if (q < a.nranks && q != a.rank && to(q))
    st_release_sys(flag_at(a.state->buf[q], a.layout, phase, step, a.rank, chunk), flag);
  if (self && q == a.rank)
    st_release_gpu(flag_at(a.state->buf[q], a.layout, phase, step, a.rank, chunk), flag);
}

// The whole block waits until each peer q with from(q) signalled (phase,
// step, chunk) into this rank's flags (with `self`, this rank's own slot
// too); false (for every thread) when the abort flag was raised meanwhile.
template <class From>
__device__ __forceinline__ bool wait_peers(const KernelArgs& a, int* aborted, int phase, int step,
                                           int chunk, uint32_t flag, From from, bool self = false) {
  __syncthreads();  // every thread has read *aborted from the previous wait
  const int q = static_cast<int>(threadIdx.x);
  if (q < a.nranks && (q != a.rank || self) && from(q) && *aborted == 0) {
    const uint32_t* f = flag_at(a.state->buf[a.rank], a.layout, phase, step, q, chunk);
    unsigned polls = 0;
    while (ld_acquire_sys(f) != flag) {
      if (++polls == kPollsPerAbortCheck) {
        polls = 0;
        if (*reinterpret_cast<const volatile unsigned*>(a.abort_flag) != 0) {
          *aborted = 1;
          break;
        }
      }
    }
  }
  __syncthreads();
  return *aborted == 0;
}

__device__ __forceinline__ void finish_call(const KernelArgs& a, unsigned long long seq) {
  for (int j = static_cast<int>(blockIdx.x + threadIdx.x * gridDim.x); j < kSeqSlots;
       j += static_cast<int>(blockDim.x * gridDim.x))
    a.state->seq[j] = seq;
}

// This thread's packs of the input chunk that starts at pack `base` (those
// past the end are left unset).
template <class T>
__device__ __forceinline__ void load_chunk(const KernelArgs& a, const T* send, bool aligned,
                                           size_t packs, size_t base, uint4 (&v)[kUnroll]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const size_t j = base + u * kThreads + threadIdx.x;
    if (j < packs) v[u] = load_pack(send, j, a.count, aligned);
  }
}

// ---- LL ---------------------------------------------------------------------------

template <class T>
struct Unit8 {
  static constexpr int kPer = 8 / static_cast<int>(sizeof(T));
  T v[kPer];
};

// Thread t of block b owns 8-byte unit b*kThreads+t. It writes its unit with
// the call's flag twice into each peer's inbox line, then combines the lines
// of ranks 0..n-1 in that order from its own inbox.
template <class T, int OP>
__global__ void __launch_bounds__(kThreads) ll_kernel(KernelArgs a) {
  using U = Unit8<T>;
  constexpr int kPer = U::kPer;
  const T* send = static_cast<const T*>(a.send);
  T* recv = static_cast<T*>(a.recv);
  const unsigned long long seq = a.state->seq[blockIdx.x] + 1;
  const uint32_t flag = flag_of(seq);
  const int phase = static_cast<int>(seq & 1);
  const size_t unit = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  const size_t first = unit * kPer;
  const bool active = first < a.count;
  const bool whole = active && first + kPer <= a.count;
  const size_t n = static_cast<size_t>(a.nranks);
  const size_t units = a.layout.capacity.ll / 8;  // lines per sender
  auto line = [&](int owner, int sender) {
    return reinterpret_cast<uint4*>(a.state->buf[owner] + a.layout.ll_off) +
           (static_cast<size_t>(phase) * n + static_cast<size_t>(sender)) * units + unit;
  };

  U mine{};
  if (whole && (reinterpret_cast<uintptr_t>(send + first) & 7) == 0) {
    mine = *reinterpret_cast<const U*>(send + first);
  } else if (active) {
    for (int k = 0; k < kPer && first + k < a.count; ++k) mine.v[k] = send[first + k];
  }

  if (active) {
    uint2 bits;
    memcpy(&bits, &mine, 8);
    for (int p = 0; p < a.nranks; ++p)
      if (p != a.rank) st_volatile_line(line(p, a.rank), make_uint4(bits.x, flag, bits.y, flag));

    U acc{};
    bool aborted = false;
    for (int r = 0; r < a.nranks && !aborted; ++r) {
      U theirs;
      if (r == a.rank) {
        theirs = mine;
      } else {
        const uint4* l = line(a.rank, r);
        uint4 got;
        unsigned polls = 0;
        while (true) {
          got = ld_volatile_line(l);
          if (got.y == flag && got.w == flag) break;
          if (++polls == kPollsPerAbortCheck) {
            polls = 0;
            if (*reinterpret_cast<const volatile unsigned*>(a.abort_flag) != 0) {
              aborted = true;
              break;
            }
          }
        }
        const uint2 b = make_uint2(got.x, got.z);
        memcpy(&theirs, &b, 8);
      }
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const T v = prepare<T, OP>(theirs.v[k], a.nranks);
        acc.v[k] = r == 0 ? v : combine<T, OP>(acc.v[k], v);
      }
    }
    if (!aborted) {
      if (whole && (reinterpret_cast<uintptr_t>(recv + first) & 7) == 0) {
        *reinterpret_cast<U*>(recv + first) = acc;
      } else {
        for (int k = 0; k < kPer && first + k < a.count; ++k) recv[first + k] = acc.v[k];
      }
    }
  }
  __syncthreads();  // every thread read its sequence slot before any is rewritten
  finish_call(a, seq);
}

// ---- one-shot ---------------------------------------------------------------------

// The grid is two halves of h blocks over the same chunks c = b, b+h, ...:
//  - pusher b writes chunk c of its input into every peer's one-shot slot
//    for this rank and flags it (and flags this rank's own slot once it has
//    read the chunk); pushers never wait, so they always finish;
//  - reducer b waits for chunk c's flags from every rank (its own pusher's
//    too: in place, the chunk must be read before it is overwritten) and
//    reduces it in rank order into recv, while later chunks are still on
//    the wire.
template <class T, int OP>
__global__ void __launch_bounds__(kThreads) oneshot_kernel(KernelArgs a) {
  __shared__ int aborted;
  if (threadIdx.x == 0) aborted = 0;
  const T* send = static_cast<const T*>(a.send);
  T* recv = static_cast<T*>(a.recv);
  const Layout& l = a.layout;
  const unsigned long long seq = a.state->seq[blockIdx.x] + 1;
  const uint32_t flag = flag_of(seq);
  const int phase = static_cast<int>(seq & 1);
  const size_t bytes = a.count * sizeof(T);
  const size_t packs = (bytes + 15) / 16;
  const int chunks = static_cast<int>((bytes + kChunkBytes - 1) / kChunkBytes);
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(send) | reinterpret_cast<uintptr_t>(recv)) & 15) == 0;
  const size_t stage = l.stage_off + static_cast<size_t>(phase) * l.phase_bytes;
  const int half = static_cast<int>(gridDim.x / 2);
  const bool pusher = static_cast<int>(blockIdx.x) < half;
  const int first = pusher ? static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x) - half;
  auto everyone = [](int) { return true; };

  if (pusher) {
    uint4* to_peer[kMaxRanks];
#pragma unroll
    for (int q = 0; q < kMaxRanks; ++q)
      to_peer[q] = q < a.nranks
                       ? reinterpret_cast<uint4*>(a.state->buf[q] + stage +
                                                  static_cast<size_t>(a.rank) * l.oneshot_slot)
                       : nullptr;
    for (int c = first; c < chunks; c += half) {
      uint4 v[kUnroll];
      load_chunk(a, send, aligned, packs, static_cast<size_t>(c) * kChunkPacks, v);
#pragma unroll
      for (int q = 0; q < kMaxRanks; ++q) {
        if (q >= a.nranks || q == a.rank) continue;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const size_t j = static_cast<size_t>(c) * kChunkPacks + u * kThreads + threadIdx.x;
          if (j < packs) __stcg(to_peer[q] + j, v[u]);
        }
      }
      signal_peers(a, phase, 0, c, flag, everyone, /*self=*/true);
    }
  } else {
    const char* mine = a.state->buf[a.rank] + stage;
    for (int c = first; c < chunks; c += half) {
      if (!wait_peers(a, &aborted, phase, 0, c, flag, everyone, /*self=*/true)) return;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t j = static_cast<size_t>(c) * kChunkPacks + u * kThreads + threadIdx.x;
        if (j >= packs) continue;
        Pack<T> acc;
#pragma unroll
        for (int r = 0; r < kMaxRanks; ++r) {
          if (r >= a.nranks) continue;
          const uint4 bits = r == a.rank
                                 ? load_pack(send, j, a.count, aligned)
                                 : __ldcg(reinterpret_cast<const uint4*>(
                                              mine + static_cast<size_t>(r) * l.oneshot_slot) +
                                          j);
          fold<T, OP>(acc, bits, r == 0, a.nranks);
        }
        store_pack(recv, j, a.count, aligned, bits_of(acc));
      }
    }
  }
  __syncthreads();  // every thread read its sequence slot before any is rewritten
  finish_call(a, seq);
}

// ---- two-shot ---------------------------------------------------------------------

// The chunks are split into n segments of `per` chunks; rank r owns segment
// r. Block b handles local chunk i = b, b+grid, ... of every segment:
//  1. writes chunk i of segment q of its input into peer q's reduce-scatter
//     region (slot: this rank), then flags every peer (step 0);
//  2. waits for every peer's step-0 flag of chunk i; reduces chunk i of its
//     own segment in rank order into recv and writes the result into every
//     peer's all-gather region (slot: this rank), then flags every peer
//     (step 1);
//  3. waits for every peer's step-1 flag of chunk i and copies their chunks
//     into recv.
// Every rank flags every peer for every i, with data or not (a small
// message leaves some segments empty): so each call hears from every peer,
// which is what lets calls alternate between two phases safely.
template <class T, int OP>
__global__ void __launch_bounds__(kThreads) twoshot_kernel(KernelArgs a) {
  __shared__ int aborted;
  if (threadIdx.x == 0) aborted = 0;
  const T* send = static_cast<const T*>(a.send);
  T* recv = static_cast<T*>(a.recv);
  const Layout& l = a.layout;
  const unsigned long long seq = a.state->seq[blockIdx.x] + 1;
  const uint32_t flag = flag_of(seq);
  const int phase = static_cast<int>(seq & 1);
  const size_t bytes = a.count * sizeof(T);
  const size_t packs = (bytes + 15) / 16;
  const int chunks = static_cast<int>((bytes + kChunkBytes - 1) / kChunkBytes);
  const int per = (chunks + a.nranks - 1) / a.nranks;
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(send) | reinterpret_cast<uintptr_t>(recv)) & 15) == 0;
  const size_t stage = l.stage_off + static_cast<size_t>(phase) * l.phase_bytes;
  const size_t gather = static_cast<size_t>(a.nranks) * l.twoshot_slot;  // after the RS region
  const size_t my_slot = static_cast<size_t>(a.rank) * l.twoshot_slot;
  const char* mine = a.state->buf[a.rank] + stage;
  const int grid = static_cast<int>(gridDim.x);
  // Chunk i of segment s exists when s*per+i < chunks.
  auto has = [&](int s, int i) { return s * per + i < chunks; };
  auto everyone = [](int) { return true; };

  // 1. reduce-scatter: segment q goes to rank q.
  for (int i = static_cast<int>(blockIdx.x); i < per; i += grid) {
#pragma unroll
    for (int q = 0; q < kMaxRanks; ++q) {
      if (q >= a.nranks || q == a.rank || !has(q, i)) continue;
      uint4* dst = reinterpret_cast<uint4*>(a.state->buf[q] + stage + my_slot) +
                   static_cast<size_t>(i) * kChunkPacks;
      const size_t base = static_cast<size_t>(q * per + i) * kChunkPacks;
      uint4 v[kUnroll];
      load_chunk(a, send, aligned, packs, base, v);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t j = base + u * kThreads + threadIdx.x;
        if (j < packs) __stcg(dst + u * kThreads + threadIdx.x, v[u]);
      }
    }
    signal_peers(a, phase, 0, i, flag, everyone);
  }

  // 2. reduce this rank's segment and hand the result to every peer.
  for (int i = static_cast<int>(blockIdx.x); i < per; i += grid) {
    if (!wait_peers(a, &aborted, phase, 0, i, flag, everyone)) return;
    if (has(a.rank, i)) {
      const size_t base = static_cast<size_t>(a.rank * per + i) * kChunkPacks;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t local = static_cast<size_t>(i) * kChunkPacks + u * kThreads + threadIdx.x;
        const size_t j = base + u * kThreads + threadIdx.x;
        if (j >= packs) continue;
        Pack<T> acc;
#pragma unroll
        for (int r = 0; r < kMaxRanks; ++r) {
          if (r >= a.nranks) continue;
          const uint4 bits = r == a.rank
                                 ? load_pack(send, j, a.count, aligned)
                                 : __ldcg(reinterpret_cast<const uint4*>(
                                              mine + static_cast<size_t>(r) * l.twoshot_slot) +
                                          local);
          fold<T, OP>(acc, bits, r == 0, a.nranks);
        }
        const uint4 out = bits_of(acc);
        store_pack(recv, j, a.count, aligned, out);
#pragma unroll
        for (int q = 0; q < kMaxRanks; ++q) {
          if (q >= a.nranks || q == a.rank) continue;
          __stcg(reinterpret_cast<uint4*>(a.state->buf[q] + stage + gather + my_slot) + local, out);
        }
      }
    }
    signal_peers(a, phase, 1, i, flag, everyone);
  }

  // 3. gather every peer's reduced segment.
  for (int i = static_cast<int>(blockIdx.x); i < per; i += grid) {
    if (!wait_peers(a, &aborted, phase, 1, i, flag, everyone)) return;
#pragma unroll
    for (int q = 0; q < kMaxRanks; ++q) {
      if (q >= a.nranks || q == a.rank || !has(q, i)) continue;
      const uint4* src =
          reinterpret_cast<const uint4*>(mine + gather + static_cast<size_t>(q) * l.twoshot_slot);
      const size_t base = static_cast<size_t>(q * per + i) * kChunkPacks;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t local = static_cast<size_t>(i) * kChunkPacks + u * kThreads + threadIdx.x;
        const size_t j = base + u * kThreads + threadIdx.x;
        if (j < packs) store_pack(recv, j, a.count, aligned, __ldcg(src + local));
      }
    }
  }
  finish_call(a, seq);
}

// ---- launch -----------------------------------------------------------------------

template <class T, int OP>
cudaError_t launch_typed(Algo algo, int blocks, const KernelArgs& a, cudaStream_t stream) {
  switch (algo) {
    case Algo::ll:
      ll_kernel<T, OP><<<blocks, kThreads, 0, stream>>>(a);
      break;
    case Algo::oneshot:
      oneshot_kernel<T, OP><<<blocks, kThreads, 0, stream>>>(a);
      break;
    case Algo::twoshot:
      twoshot_kernel<T, OP><<<blocks, kThreads, 0, stream>>>(a);
      break;
    case Algo::nccl:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// Calls f(TypeTag<T>{}) with T the element type of `type`, or says it is not
// one of the kernels' types.
template <class T>
struct TypeTag {
  using type = T;
};
template <class F>
cudaError_t with_type(ncclDataType_t type, F&& f) {
  switch (type) {
    case ncclInt8:
      return f(TypeTag<int8_t>{});
    case ncclUint8:
      return f(TypeTag<uint8_t>{});
    case ncclInt32:
      return f(TypeTag<int32_t>{});
    case ncclUint32:
      return f(TypeTag<uint32_t>{});
    case ncclInt64:
      return f(TypeTag<int64_t>{});
    case ncclUint64:
      return f(TypeTag<uint64_t>{});
    case ncclFloat16:
      return f(TypeTag<__half>{});
    case ncclBfloat16:
      return f(TypeTag<__nv_bfloat16>{});
    case ncclFloat32:
      return f(TypeTag<float>{});
    case ncclFloat64:
      return f(TypeTag<double>{});
    default:
      return cudaErrorNotSupported;
  }
}

// Calls f(OpTag<OP>{}) for `op` over elements of T (an average: floating
// types only).
template <int OP>
struct OpTag {
  static constexpr int value = OP;
};
template <class T, class F>
cudaError_t with_op(ncclRedOp_t op, F&& f) {
  switch (op) {
    case ncclSum:
      return f(OpTag<kSum>{});
    case ncclProd:
      return f(OpTag<kProd>{});
    case ncclMax:
      return f(OpTag<kMax>{});
    case ncclMin:
      return f(OpTag<kMin>{});
    case ncclAvg:
      if constexpr (!std::is_integral_v<T>) return f(OpTag<kAvg>{});
      return cudaErrorNotSupported;
    default:
      return cudaErrorNotSupported;
  }
}

// cudaFuncGetAttributes loads a kernel that is not loaded yet.
template <class T, int OP>
cudaError_t load_typed() {
  const void* const kernels[] = {reinterpret_cast<const void*>(ll_kernel<T, OP>),
                                 reinterpret_cast<const void*>(oneshot_kernel<T, OP>),
                                 reinterpret_cast<const void*>(twoshot_kernel<T, OP>)};
  for (const void* k : kernels) {
    cudaFuncAttributes attributes;
    if (cudaError_t e = cudaFuncGetAttributes(&attributes, k); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

bool kernels_built() { return true; }

cudaError_t load_kernels() {
  for (int t = 0; t < ncclNumTypes; ++t)
    for (int o = 0; o < ncclNumOps; ++o) {
      const auto type = static_cast<ncclDataType_t>(t);
      const auto op = static_cast<ncclRedOp_t>(o);
      size_t es = 0;
      if (!kernel_supports(type, op, &es)) continue;
      const cudaError_t e = with_type(type, [&](auto tt) {
        using T = typename decltype(tt)::type;
        return with_op<T>(op, [](auto oo) { return load_typed<T, decltype(oo)::value>(); });
      });
      if (e != cudaSuccess) return e;
    }
  return cudaSuccess;
}

bool kernel_supports(ncclDataType_t type, ncclRedOp_t op, size_t* elem_size) {
  bool is_float = false;
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      *elem_size = 1;
      break;
    case ncclFloat16:
    case ncclBfloat16:
      *elem_size = 2;
      is_float = true;
      break;
    case ncclInt32:
    case ncclUint32:
      *elem_size = 4;
      break;
    case ncclFloat32:
      *elem_size = 4;
      is_float = true;
      break;
    case ncclInt64:
    case ncclUint64:
      *elem_size = 8;
      break;
    case ncclFloat64:
      *elem_size = 8;
      is_float = true;
      break;
    default:
      return false;  // the float8 types and anything newer: NCCL
  }
  if (op == ncclAvg) return is_float;
  return op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin;
}

cudaError_t launch_allreduce(Algo algo, int max_blocks, const KernelArgs& a, ncclDataType_t type,
                             ncclRedOp_t op, cudaStream_t stream) {
  size_t es = 0;
  if (!kernel_supports(type, op, &es)) return cudaErrorNotSupported;
  const int blocks = grid_blocks(algo, a.count * es, a.nranks, max_blocks);
  return with_type(type, [&](auto tt) {
    using T = typename decltype(tt)::type;
    return with_op<T>(
        op, [&](auto oo) { return launch_typed<T, decltype(oo)::value>(algo, blocks, a, stream); });
  });
}

}  // namespace cc::fast
