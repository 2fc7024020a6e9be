// One device buffer per rank that every rank of the communicator maps,
// through CUDA IPC handles that cc exchanges itself (the rendezvous store, or
// an NCCL all-gather for a communicator made by split): cc's kernels write
// into their peers' buffers without any of NCCL's device structures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

namespace cc::fast {

// "cudaErrorX: its description" for `e`; clears CUDA's last error.
std::string cuda_error_text(cudaError_t e);

inline constexpr uint32_t kRecordMagic = 0xcc0fa571u;
inline constexpr uint32_t kRecordVersion = 1;

// What one rank tells the others, fixed size so NCCL can gather it.
struct PeerRecord {
  uint32_t magic = kRecordMagic;
  uint32_t version = kRecordVersion;
  int32_t rank = -1;
  int32_t able = 0;       // 1: its buffer is exported below
  char why[256] = {};     // when not able: why
  char boot_id[40] = {};  // /proc/sys/kernel/random/boot_id: the same on one host
  char host[64] = {};
  char bus_id[20] = {};  // PCI bus id of its GPU
  uint32_t pid = 0;
  uint32_t required = 0;  // its CC_FAST_ALLREDUCE is require: every rank fails without
  uint64_t address = 0;   // the buffer in its own address space (same-process peers)
  uint64_t bytes = 0;
  cudaIpcMemHandle_t handle{};
};
static_assert(sizeof(PeerRecord) % 8 == 0, "gathered as whole words");

class PeerMemory {
 public:
  PeerMemory() = default;
  ~PeerMemory();
  PeerMemory(const PeerMemory&) = delete;
  PeerMemory& operator=(const PeerMemory&) = delete;

  // Allocates and zeroes this rank's buffer on the current device and fills
  // `record` (able = 1). False with the reason in record->why.
  bool allocate(size_t bytes, int rank, const std::string& host, PeerRecord* record);

  // Maps every peer's buffer. Every record must be able, from this host and
  // of the same size; peers in this same process are reached directly.
  bool open(const std::vector<PeerRecord>& records, int rank, std::string* why);

  // Unmaps the peers' buffers (call once no kernel of this communicator
  // runs here).
  void close_peers();

  // close_peers(), then frees this rank's buffer. CUDA wants every peer to
  // have unmapped a buffer before it is freed: on a healthy teardown the
  // ranks pass a barrier between the two.
  void release();

  char* local() const { return local_; }
  char* peer(int r) const { return peers_[static_cast<size_t>(r)]; }
  size_t bytes() const { return bytes_; }

 private:
  char* local_ = nullptr;
  size_t bytes_ = 0;
  std::vector<char*> peers_;
  std::vector<bool> imported_;
};

// This machine's boot id ("" when unreadable).
std::string boot_id();

}  // namespace cc::fast
