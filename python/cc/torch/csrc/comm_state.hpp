// What a cc backend and its Work objects share: the communicator (created at
// the group's first operation, on that operation's device), the rendezvous
// server rank 0 hosts for it, and the stream cc's operations run on.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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

// Whether CC_TORCH_TIMING=1 asks for the timing lines on stderr: when a
// group's first operation came and how long cc_comm_init took in it.
bool timing_requested();

class CommState {
 public:
  CommState(int rank, int size, Rendezvous rendezvous);
  // Around a communicator already made (a shrink's) on `device`.
  CommState(int rank, int size, Rendezvous rendezvous, cc_comm_t comm, c10::DeviceIndex device);
  // Destroys the communicator, then stops the server; where the destroy is
  // refused (live CUDA graphs), warns on stderr and leaves both.
  ~CommState();
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
  int rank() const { return rank_; }
  int size() const { return size_; }
  cc_comm_t handle() const { return comm_; }

  // Aborts the communicator (idempotent; the next cc call raises).
  void abort();
  // Destroys the communicator now (idempotent); later operations raise.
  // Returns cc's message when its destroy found that the ranks' last calls
  // differ (CC_ERR_MISMATCH), else "". Raises cc's message where the destroy
  // is refused (CC_ERR_INVALID_USAGE: CUDA graphs that captured its calls
  // are alive) and keeps the communicator: a shutdown after they are
  // destroyed frees it.
  std::string shutdown();
  // cc's message for failed ranks, when libcc reports any ("" otherwise).
  std::string failure_words();
  // The communicator's deadline (cc_comm_timeout), known once comm() made it.
  std::chrono::milliseconds timeout();

  // Whether libcc has what shrink() needs.
  static bool can_shrink();
  // The communicator's next generation without `excluded` (group ranks,
  // sorted), through cc_comm_shrink: cc leaves out the ranks its rendezvous
  // found failed, so `excluded` must be those (a rank that is alive cannot
  // be left out; the message says so). Collective over the survivors;
  // blocking. The rendezvous server this process hosts moves to the new
  // state. With `abort_parent`, this communicator is aborted first (its
  // pending work stopped), so its destroy cannot wait on anyone.
  std::shared_ptr<CommState> shrink(const std::vector<int64_t>& excluded, bool abort_parent);

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
  const std::chrono::steady_clock::time_point made_at_ = std::chrono::steady_clock::now();

  // Destroys the communicator (under mutex_). Where cc refuses
  // (CC_ERR_INVALID_USAGE: CUDA graphs that captured its calls are alive),
  // it stays and `refused` gets cc's message. Returns cc's result.
  cc_result_t destroy_comm(std::string* refused);
  // The ranks libcc reports failed on `comm` (cc_comm_failed_ranks), sorted.
  std::vector<int64_t> failed_on(cc_comm_t comm) const;
  // Waits up to `wait` until every rank of `excluded` is reported failed on
  // this generation-0 communicator; the ones that are not, else none.
  std::vector<int64_t> not_failed(const std::vector<int64_t>& excluded,
                                  std::chrono::milliseconds wait) const;
};

}  // namespace cc_torch
