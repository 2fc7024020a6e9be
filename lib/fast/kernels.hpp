// cc's all-reduce kernels over peer memory that cc maps itself (CUDA IPC):
// no NCCL device structure is compiled in, so they run with any NCCL.
//
// Every rank exports one buffer with the same layout (Layout): flags, the LL
// inbox and the staging area. Data only ever moves by a rank writing into a
// peer's buffer (NVLink stores), never by reading a peer's memory:
//  - ll       each 8 bytes travel with two 4-byte flags in a 16-byte line (no
//             fence); the receiver polls the lines. Latency first.
//  - oneshot  half the blocks write this rank's whole input into every peer's
//             staging slot, 32 KiB chunk by chunk, each chunk followed by a
//             flag (a release store at system scope); the other half reduce
//             each chunk from every rank as soon as its flags arrived, while
//             later chunks are still on the wire.
//  - twoshot  reduce-scatter then all-gather: each rank writes segment p of
//             its input to rank p, rank p reduces its segment and writes the
//             result into every peer's staging, each rank copies them out.
// Every element is reduced in rank order 0..n-1 (in twoshot by the one rank
// that owns it, then copied), so every rank ends with the same bits.
//
// Calls alternate between two phases of flags and staging (parity of a call
// sequence number kept in device memory, the same on every rank), so a rank
// a call ahead never overwrites what a slower peer still reads. Waits poll
// the host's abort flag, so an abort or the watchdog ends a kernel whose peer
// is gone.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "lib/fast/plan.hpp"

namespace cc::fast {

inline constexpr int kMaxRanks = 8;
inline constexpr int kThreads = 512;                // threads per block, every kernel
inline constexpr size_t kLLMaxBytes = 2048 * 1024;  // one 8-byte unit per thread
inline constexpr int kLLMaxBlocks = static_cast<int>(kLLMaxBytes / 8 / kThreads);  // 512
inline constexpr int kUnroll = 4;  // 16-byte packs per thread per chunk
inline constexpr size_t kChunkBytes = size_t{kThreads} * 16 * kUnroll;  // 32 KiB
inline constexpr size_t kTwoShotMaxBytes = size_t{8} << 20;
inline constexpr int kMaxChunks = static_cast<int>(kTwoShotMaxBytes / kChunkBytes);  // 256
inline constexpr int kMaxBlocks = 128;  // one-shot and two-shot grids
inline constexpr int kDefaultBlocks = 64;
inline constexpr int kSeqSlots = kLLMaxBlocks;  // >= every grid
static_assert(kMaxBlocks <= kSeqSlots, "every block needs a sequence slot");

// LL keeps two 16-byte lines per 8 bytes per sender: smaller with more ranks.
constexpr size_t ll_max_bytes(int nranks) {
  return nranks <= 2 ? kLLMaxBytes : nranks <= 4 ? kLLMaxBytes / 2 : kLLMaxBytes / 4;
}

// One-shot keeps one slot per sender: smaller with more ranks.
constexpr size_t oneshot_max_bytes(int nranks) {
  return nranks <= 2 ? size_t{8} << 20 : nranks <= 4 ? size_t{4} << 20 : size_t{2} << 20;
}

// The exported buffer, the same on every rank of a communicator.
struct Layout {
  int nranks = 0;
  size_t flags_off = 0;  // uint32 flags[2 phases][2 steps][kMaxRanks senders][kMaxChunks]
  size_t ll_off = 0;     // uint4 lines[2 phases][nranks senders][ll_max_bytes / 8]
  size_t stage_off = 0;  // 2 phases x phase_bytes
  size_t phase_bytes = 0;
  size_t oneshot_slot = 0;  // one-shot: bytes per sender
  size_t twoshot_slot = 0;  // two-shot: bytes per sender, reduce-scatter then all-gather region
  size_t total = 0;
  Capacity capacity;
};

constexpr size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

constexpr Layout make_layout(int nranks) {
  Layout l;
  l.nranks = nranks;
  const size_t n = static_cast<size_t>(nranks);
  l.flags_off = 0;
  const size_t flags_bytes = size_t{2} * 2 * kMaxRanks * kMaxChunks * sizeof(uint32_t);
  l.ll_off = round_up(flags_bytes, 4096);
  const size_t ll_bytes = size_t{2} * n * (ll_max_bytes(nranks) / 8) * 16;
  l.stage_off = round_up(l.ll_off + ll_bytes, 4096);
  l.oneshot_slot = round_up(oneshot_max_bytes(nranks), 4096);
  const size_t seg_chunks = (static_cast<size_t>(kMaxChunks) + n - 1) / n;
  l.twoshot_slot = seg_chunks * kChunkBytes;
  const size_t os = n * l.oneshot_slot, ts = 2 * n * l.twoshot_slot;
  l.phase_bytes = os > ts ? os : ts;
  l.total = l.stage_off + 2 * l.phase_bytes;
  l.capacity.ll = ll_max_bytes(nranks);
  l.capacity.oneshot = oneshot_max_bytes(nranks);
  l.capacity.twoshot = kTwoShotMaxBytes;
  return l;
}

// In device memory, one per communicator: every rank's buffer as this rank
// reaches it (its own at [rank]) and the per-block call counters, all equal
// between calls (each call's blocks write every slot).
struct DeviceState {
  char* buf[kMaxRanks];
  unsigned long long seq[kSeqSlots];
};

struct KernelArgs {
  DeviceState* state = nullptr;
  const unsigned* abort_flag = nullptr;  // mapped host memory; non-zero = give up
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  int rank = 0;
  int nranks = 0;
  Layout layout;
};

// Whether this libcc carries the kernels (built with nvcc).
bool kernels_built();

// Whether the kernels take this type and operation; `elem_size` gets its size.
bool kernel_supports(ncclDataType_t type, ncclRedOp_t op, size_t* elem_size);

// The grid (thread blocks of kThreads; one per SM at most) a call of
// `bytes` gets; the same on every rank.
constexpr int grid_blocks(Algo algo, size_t bytes, int nranks, int max_blocks) {
  if (max_blocks <= 0) max_blocks = kDefaultBlocks;
  if (max_blocks > kMaxBlocks) max_blocks = kMaxBlocks;
  const size_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  size_t blocks = 0;
  switch (algo) {
    case Algo::ll:
      return static_cast<int>((bytes + size_t{8} * kThreads - 1) / (size_t{8} * kThreads));
    case Algo::oneshot: {  // half push, half reduce; at least one of each
      const size_t half = chunks < static_cast<size_t>(max_blocks / 2)
                              ? chunks
                              : static_cast<size_t>(max_blocks / 2);
      return 2 * static_cast<int>(half < 1 ? 1 : half);
    }
    case Algo::twoshot:  // the grid covers one segment's chunks
      blocks = (chunks + static_cast<size_t>(nranks) - 1) / static_cast<size_t>(nranks);
      break;
    case Algo::nccl:
      return 0;
  }
  if (blocks > static_cast<size_t>(max_blocks)) blocks = static_cast<size_t>(max_blocks);
  return blocks < 1 ? 1 : static_cast<int>(blocks);
}

// Loads every kernel onto the current device now. CUDA loads a kernel at
// its first launch by default (lazy loading), and a load waits for the
// kernels running on the device: a first launch behind one of cc's kernels
// that waits for a peer would wait with it, and the peer perhaps for this
// launch. NCCL loads its kernels at init for the same reason. The first
// call in a process takes 42 to 76 ms on an H200 (the compressed code of
// 135 kernels); later calls about 0.1 ms.
cudaError_t load_kernels();

// Enqueues one all-reduce on `stream`. `algo` is ll, oneshot or twoshot and
// the size within its capacity; `max_blocks` caps one-shot and two-shot.
cudaError_t launch_allreduce(Algo algo, int max_blocks, const KernelArgs& args, ncclDataType_t type,
                             ncclRedOp_t op, cudaStream_t stream);

}  // namespace cc::fast
