// A device allocation of the gpu tests (gpu_env.hpp's DeviceBuffer, the
// one-GPU ranks' buffers): at least one byte, freed on scope exit. Its copies
// and fills go through one stream and wait for it; a failed CUDA call throws
// std::runtime_error with its message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

namespace cc::test {

// Throws std::runtime_error "<what> failed: <CUDA's error message>" unless e is
// cudaSuccess (the error is cleared first).
void check_cuda(cudaError_t e, const std::string& what);

class DeviceMemory {
 public:
  // `stream`: the one its copies and fills go through (0: the legacy
  // default stream).
  DeviceMemory(size_t bytes, cudaStream_t stream);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return ptr_; }
  char* bytes() const { return static_cast<char*>(ptr_); }
  size_t size() const { return size_; }
  void fill(int byte);
  void fill_junk() { fill(0x7b); }  // bytes no correct result has
  void upload(const std::vector<uint8_t>& host, size_t offset = 0);
  std::vector<uint8_t> download(size_t bytes, size_t offset = 0) const;

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
  cudaStream_t stream_;
};

}  // namespace cc::test
