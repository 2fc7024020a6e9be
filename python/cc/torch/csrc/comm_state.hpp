// What a cc backend and its Work objects share: the communicator (created at
// the group's first operation, on that operation's device), the rendezvous
// server rank 0 hosts for it, and the stream cc's operations run on.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include <c10/cuda/CUDAStream.h>

#include "cc_api.hpp"

namespace cc_torch {

struct Rendezvous {
  std::string addr;  // where the group's cc rendezvous server listens
  int port = 0;
  std::string job_id;            // the job's namespace on that server
  int timeout_ms = -1;           // cc's init/collective deadline; -1: CC_TIMEOUT_MS or cc's default
  cc_server_t server = nullptr;  // owned: the server this process hosts (group rank 0)
};

class CommState {
 public:
  CommState(int rank, int size, Rendezvous rendezvous);
  ~CommState();  // destroys the communicator, then stops the server
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;

  // The communicator, created on `device` by the first call (blocking, and
  // collective: every rank's first operation creates it). Later calls check
  // that `device` is the same one.
  cc_comm_t comm(c10::DeviceIndex device);
  // The device and stream, valid once comm() succeeded.
  c10::DeviceIndex device() const { return device_; }
  const c10::cuda::CUDAStream& stream() const { return *stream_; }
  bool created() const { return comm_ != nullptr; }
  cc_comm_t handle() const { return comm_; }

  // Aborts the communicator (idempotent; the next cc call raises).
  void abort();
  // Destroys the communicator now (idempotent); later operations raise.
  // Returns cc's message when its destroy found that the ranks' last calls
  // differ (CC_ERR_MISMATCH), else "".
  std::string shutdown();
  // cc's words for failed ranks, when libcc reports any ("" otherwise).
  std::string failure_words();
  // The communicator's deadline (cc_comm_timeout), known once comm() made it.
  std::chrono::milliseconds timeout();

 private:
  const int rank_;
  const int size_;
  Rendezvous rendezvous_;
  std::mutex mutex_;
  cc_comm_t comm_ = nullptr;
  bool shut_ = false;
  c10::DeviceIndex device_ = -1;
  std::chrono::milliseconds timeout_{0};
  std::optional<c10::cuda::CUDAStream> stream_;
};

}  // namespace cc_torch
