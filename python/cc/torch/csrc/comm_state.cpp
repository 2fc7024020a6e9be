#include "comm_state.hpp"

#include <utility>
#include <vector>

#include <c10/cuda/CUDAGuard.h>

namespace cc_torch {

CommState::CommState(int rank, int size, Rendezvous rendezvous)
    : rank_(rank), size_(size), rendezvous_(std::move(rendezvous)) {}

CommState::~CommState() {
  // The communicator first: its destroy still talks to the server (leaving
  // the job). Nothing may escape a destructor.
  try {
    shutdown();
    if (rendezvous_.server != nullptr) api().server_stop(rendezvous_.server);
  } catch (...) {
  }
  rendezvous_.server = nullptr;
}

cc_comm_t CommState::comm(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_ != nullptr) {
    if (device != device_)
      fail("cc backend (rank " + std::to_string(rank_) +
           "): this process group runs on cuda:" + std::to_string(device_) +
           " (the device of its first operation), but a tensor is on "
           "cuda:" +
           std::to_string(device) +
           ". Keep one device per process (torch.cuda.set_device) or move the tensor");
    return comm_;
  }
  if (shut_)
    fail("cc backend (rank " + std::to_string(rank_) +
         "): the process group was shut down or aborted; create a new one");
  // cc_comm_init makes its device current; the caller's current device stays.
  c10::cuda::CUDAGuard guard(device);
  cc_config_t config = CC_CONFIG_INIT;
  config.device = device;
  config.rendezvous = CC_RENDEZVOUS_EXTERNAL;
  config.job_id = rendezvous_.job_id.c_str();
  if (rendezvous_.timeout_ms > 0) config.timeout_ms = rendezvous_.timeout_ms;
  cc_comm_t made = nullptr;
  const cc_result_t r =
      api().comm_init(&made, rank_, size_, rendezvous_.addr.c_str(), rendezvous_.port, &config);
  if (r != CC_SUCCESS) fail("cc backend: cc_comm_init", r);
  // The host wait of a Work waits as long as the communicator does: its
  // deadline as libcc resolved it (the group's timeout, CC_TIMEOUT_MS or
  // cc's default), never a default of the backend's own.
  int timeout_ms = 0;
  const cc_result_t t = api().comm_timeout(made, &timeout_ms);
  if (t != CC_SUCCESS) {
    api().comm_destroy(made);
    fail("cc backend: cc_comm_timeout", t);
  }
  comm_ = made;
  timeout_ = std::chrono::milliseconds(timeout_ms);
  device_ = device;
  stream_.emplace(c10::cuda::getStreamFromPool(false, device));
  return comm_;
}

void CommState::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  shut_ = true;
  if (comm_ != nullptr) api().comm_abort(comm_);
}

std::string CommState::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  shut_ = true;
  if (comm_ == nullptr) return "";
  const cc_result_t r = api().comm_destroy(comm_);
  comm_ = nullptr;  // freed, whatever the verdict
  return r == CC_ERR_MISMATCH ? words("cc_comm_destroy", r) : std::string();
}

std::string CommState::failure_words() {
  const auto failed_ranks = api().comm_failed_ranks;
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_ranks == nullptr || comm_ == nullptr) return "";
  std::vector<int> ranks(static_cast<size_t>(size_ > 0 ? size_ : 1));
  int count = 0;
  if (failed_ranks(comm_, ranks.data(), static_cast<int>(ranks.size()), &count) != CC_SUCCESS ||
      count <= 0)
    return "";
  std::string text = "cc backend (rank " + std::to_string(rank_) + "): rank(s)";
  for (int i = 0; i < count && i < static_cast<int>(ranks.size()); ++i)
    text += " " + std::to_string(ranks[static_cast<size_t>(i)]);
  return text +
         " of this process group failed; its results cannot be trusted. Destroy the "
         "process group and start again (or recover with cc's shrink/regrow)";
}

std::chrono::milliseconds CommState::timeout() {
  std::lock_guard<std::mutex> lock(mutex_);
  return timeout_;
}

}  // namespace cc_torch
