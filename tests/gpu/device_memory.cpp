#include "tests/gpu/device_memory.hpp"

#include <stdexcept>
#include <string>

namespace cc::test {

void check_cuda(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw std::runtime_error(what + " failed: " + cudaGetErrorString(e));
}

DeviceMemory::DeviceMemory(size_t bytes, cudaStream_t stream) : size_(bytes), stream_(stream) {
  if (cudaError_t e = cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes); e != cudaSuccess) {
    ptr_ = nullptr;
    check_cuda(e, "cudaMalloc of " + std::to_string(bytes) + " bytes");
  }
}

DeviceMemory::~DeviceMemory() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

void DeviceMemory::fill(int byte) {
  check_cuda(cudaMemsetAsync(ptr_, byte, size_ == 0 ? 1 : size_, stream_), "cudaMemsetAsync");
  check_cuda(cudaStreamSynchronize(stream_), "cudaMemsetAsync");
}

void DeviceMemory::upload(const std::vector<uint8_t>& host, size_t offset) {
  if (host.empty()) return;
  if (offset + host.size() > size_) throw std::runtime_error("upload past the buffer");
  check_cuda(
      cudaMemcpyAsync(bytes() + offset, host.data(), host.size(), cudaMemcpyHostToDevice, stream_),
      "copying to the device");
  check_cuda(cudaStreamSynchronize(stream_), "copying to the device");
}

std::vector<uint8_t> DeviceMemory::download(size_t n, size_t offset) const {
  std::vector<uint8_t> host(n);
  if (n == 0) return host;
  if (offset + n > size_) throw std::runtime_error("download past the buffer");
  check_cuda(cudaMemcpyAsync(host.data(), bytes() + offset, n, cudaMemcpyDeviceToHost, stream_),
             "copying from the device");
  check_cuda(cudaStreamSynchronize(stream_), "copying from the device");
  return host;
}

}  // namespace cc::test
