#include "lib/fast/peer_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace cc::fast {
namespace {

template <size_t N>
void copy_text(char (&dst)[N], const std::string& src) {
  std::memset(dst, 0, N);
  std::memcpy(dst, src.data(), std::min(src.size(), N - 1));
}

template <size_t N>
std::string text_of(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

}  // namespace

std::string cuda_error_text(cudaError_t e) {
  cudaGetLastError();
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

PeerMemory::~PeerMemory() { release(); }

bool PeerMemory::allocate(size_t bytes, int rank, const std::string& host, PeerRecord* record) {
  *record = PeerRecord{};
  record->rank = rank;
  copy_text(record->host, host);
  copy_text(record->boot_id, boot_id());
  record->pid = static_cast<uint32_t>(getpid());
  auto fail = [&](const std::string& what, cudaError_t e) {
    copy_text(record->why, what + " failed (" + cuda_error_text(e) + ")");
    release();
    return false;
  };
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return fail("cudaGetDevice", e);
  if (cudaError_t e = cudaDeviceGetPCIBusId(record->bus_id, sizeof record->bus_id, device);
      e != cudaSuccess)
    return fail("cudaDeviceGetPCIBusId", e);
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess)
    return fail("cudaMalloc of " + std::to_string(bytes >> 20) + " MiB for the peer buffer", e);
  local_ = static_cast<char*>(p);
  bytes_ = bytes;
  if (cudaError_t e = cudaMemset(p, 0, bytes); e != cudaSuccess) return fail("cudaMemset", e);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return fail("cudaMemset", e);
  if (cudaError_t e = cudaIpcGetMemHandle(&record->handle, p); e != cudaSuccess)
    return fail("cudaIpcGetMemHandle", e);
  record->address = reinterpret_cast<uint64_t>(p);
  record->bytes = bytes;
  record->able = 1;
  return true;
}

bool PeerMemory::open(const std::vector<PeerRecord>& records, int rank, std::string* why) {
  const PeerRecord* me = nullptr;
  for (const PeerRecord& r : records)
    if (r.rank == rank) me = &r;
  if (me == nullptr || local_ == nullptr) {
    *why = "this rank's own buffer is missing";
    return false;
  }
  peers_.assign(records.size(), nullptr);
  imported_.assign(records.size(), false);
  for (size_t i = 0; i < records.size(); ++i) {
    const PeerRecord& r = records[i];
    const std::string who = "rank " + std::to_string(r.rank) + " (host " + text_of(r.host) + ")";
    if (r.magic != kRecordMagic || r.version != kRecordVersion || r.rank != static_cast<int>(i)) {
      *why = who + " sent a peer record of another cc version";
      return false;
    }
    if (r.rank == rank) {
      peers_[i] = local_;
      continue;
    }
    if (text_of(r.boot_id).empty() || text_of(r.boot_id) != text_of(me->boot_id)) {
      *why = who +
             " runs on another machine (or its boot id is unreadable): cc's kernels need "
             "every rank on one host";
      return false;
    }
    if (r.bytes != bytes_) {
      *why = who + " made a peer buffer of another size";
      return false;
    }
    if (r.pid == me->pid) {
      // The same process (ranks on threads): the address is valid here; the
      // peer's device must be this one or reachable from it.
      int peer_device = -1, here = -1;
      cudaGetDevice(&here);
      if (cudaDeviceGetByPCIBusId(&peer_device, r.bus_id) != cudaSuccess) {
        cudaGetLastError();
        *why = who + " uses GPU " + text_of(r.bus_id) + ", which this process cannot see";
        return false;
      }
      if (peer_device == here) {  // ranks sharing a GPU (the kernels' one-GPU tests)
        peers_[i] = reinterpret_cast<char*>(r.address);
        continue;
      }
      int can = 0;
      cudaDeviceCanAccessPeer(&can, here, peer_device);
      if (can == 0) {
        *why = who + "'s GPU " + text_of(r.bus_id) + " is not peer-accessible from GPU " +
               std::to_string(here);
        return false;
      }
      const cudaError_t e = cudaDeviceEnablePeerAccess(peer_device, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        *why = "cudaDeviceEnablePeerAccess to " + who + "'s GPU failed (" + cuda_error_text(e) + ")";
        return false;
      }
      cudaGetLastError();
      peers_[i] = reinterpret_cast<char*>(r.address);
      continue;
    }
    void* p = nullptr;
    const cudaError_t e = cudaIpcOpenMemHandle(&p, r.handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      *why = "cudaIpcOpenMemHandle of " + who + "'s buffer (GPU " + text_of(r.bus_id) +
             ") failed (" + cuda_error_text(e) +
             "): its GPU is not peer-reachable from this one, or the processes do not share "
             "an IPC namespace";
      return false;
    }
    peers_[i] = static_cast<char*>(p);
    imported_[i] = true;
  }
  return true;
}

void PeerMemory::close_peers() {
  for (size_t i = 0; i < peers_.size(); ++i)
    if (imported_[i] && peers_[i] != nullptr) cudaIpcCloseMemHandle(peers_[i]);
  peers_.clear();
  imported_.clear();
  cudaGetLastError();
}

void PeerMemory::release() {
  close_peers();
  if (local_ != nullptr) cudaFree(local_);
  local_ = nullptr;
  bytes_ = 0;
  cudaGetLastError();
}

}  // namespace cc::fast
