// What every gpu test shares: the world communicator made once by main, a
// stream, device buffers, and a bounded wait (a rank that never finishes
// fails the test instead of hanging it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "cc/cc.h"
#include "tests/gpu/device_memory.hpp"

namespace cc::test {

cc_comm_t world();
int world_rank();
int world_size();
cudaStream_t stream();
cc_stream_t cc_stream();

// Waits for the stream up to 120 s; false (and the comm is aborted, so the
// other tests fail fast rather than hang) when it does not finish.
bool sync_stream(cudaStream_t s = stream());

// A device allocation of at least one byte, freed on scope exit. Its copies
// and fills go through the test stream: a non-blocking stream, so the legacy
// default stream's copies would not be ordered with the collectives.
class DeviceBuffer : public DeviceMemory {
 public:
  explicit DeviceBuffer(size_t bytes) : DeviceMemory(bytes, stream()) {}
};

// The message of a failed cc call, for test output.
std::string describe(cc_result_t r);

// CHECKs that a call returned CC_SUCCESS and that the stream then finished;
// false when either did not (the message names `what`).
bool call_and_wait(const std::string& what, cc_result_t r);

}  // namespace cc::test
