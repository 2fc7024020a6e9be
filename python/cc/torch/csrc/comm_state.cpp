#include "comm_state.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>
#include <vector>

#include <c10/cuda/CUDAGuard.h>

namespace cc_torch {
namespace {

// "2, 5" for a list of ranks.
std::string rank_words(const std::vector<int64_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out.empty() ? "none" : out;
}

// How long a shrink waits for cc to report the ranks it was asked to
// exclude as failed (another survivor may have raised first): the
// communicator's deadline, at most this.
constexpr std::chrono::milliseconds kMostFailureWait{30000};

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

bool timing_requested() {
  static const bool requested = env_flag("CC_TORCH_TIMING");
  return requested;
}

CommState::CommState(int rank, int size, Rendezvous rendezvous)
    : rank_(rank), size_(size), rendezvous_(std::move(rendezvous)) {}

CommState::CommState(int rank, int size, Rendezvous rendezvous, cc_comm_t comm,
                     c10::DeviceIndex device)
    : rank_(rank), size_(size), rendezvous_(std::move(rendezvous)), comm_(comm), device_(device) {
  try {
    int timeout_ms = 0;
    const cc_result_t t = api().comm_timeout(comm, &timeout_ms);
    if (t != CC_SUCCESS) fail("cc backend: cc_comm_timeout", t);
    timeout_ = std::chrono::milliseconds(timeout_ms);
    stream_.emplace(c10::cuda::getStreamFromPool(false, device));
  } catch (...) {
    // No destructor runs for a constructor that throws: free what it took over.
    api().comm_destroy(comm);
    if (rendezvous_.server != nullptr) api().server_stop(rendezvous_.server);
    throw;
  }
}

CommState::~CommState() {
  // The communicator first: its destroy still talks to the server (leaving
  // the job). Nothing may escape a destructor.
  try {
    std::string refused;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      destroy_comm(&refused);
    }
    if (!refused.empty())
      std::fprintf(stderr,
                   "cc backend (rank %d): warning: the process group went away without its "
                   "communicator, which cc could not destroy: it stays in this process, with "
                   "the rendezvous server it talks to. %s\n",
                   rank_, refused.c_str());
    else if (rendezvous_.server != nullptr)
      api().server_stop(rendezvous_.server);
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
  const auto init_start = std::chrono::steady_clock::now();
  const cc_result_t r =
      api().comm_init(&made, rank_, size_, rendezvous_.addr.c_str(), rendezvous_.port, &config);
  if (timing_requested())
    std::fprintf(stderr,
                 "cc.torch timing: rank %d of %d (job %s): the group's first operation came "
                 "%.1f ms after its backend was made; cc_comm_init took %.1f ms (%s)\n",
                 rank_, size_, rendezvous_.job_id.c_str(),
                 std::chrono::duration<double, std::milli>(init_start - made_at_).count(),
                 ms_since(init_start), r == CC_SUCCESS ? "made" : "failed");
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

cc_result_t CommState::destroy_comm(std::string* refused) {
  shut_ = true;
  if (comm_ == nullptr) return CC_SUCCESS;
  const cc_result_t r = api().comm_destroy(comm_);
  // Refused while CUDA graphs that captured its calls live, the
  // communicator untouched: kept, for a destroy once they are gone.
  if (r == CC_ERR_INVALID_USAGE) {
    *refused = words("cc_comm_destroy", r);
    return r;
  }
  comm_ = nullptr;  // freed, whatever the verdict
  return r;
}

std::string CommState::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string refused;
  const cc_result_t r = destroy_comm(&refused);
  if (!refused.empty()) fail(refused);
  return r == CC_ERR_MISMATCH ? words("cc_comm_destroy", r) : std::string();
}

std::string CommState::failure_words() {
  const auto failed_ranks = api().comm_failed_ranks;
  const auto check = api().comm_check;
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_ == nullptr) return "";
  // A communicator that still works has no failure, whatever its failed
  // ranks say: after a shrink they name the ranks the shrink left out.
  if (check != nullptr) {
    const cc_result_t health = check(comm_);
    if (health == CC_SUCCESS) return "";
    int generation = 0;
    if (api().comm_generation != nullptr) api().comm_generation(comm_, &generation);
    if (generation > 0) return text("cc backend (rank ", rank_, "): ", words("cc_comm_check", health));
  }
  if (failed_ranks == nullptr) return "";
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

bool CommState::can_shrink() {
  const Api& a = api();
  return a.comm_shrink != nullptr && a.comm_rank != nullptr && a.comm_size != nullptr &&
         a.comm_failed_ranks != nullptr && a.comm_generation != nullptr;
}

std::vector<int64_t> CommState::failed_on(cc_comm_t comm) const {
  std::vector<int> ranks(static_cast<size_t>(size_ > 0 ? size_ : 1));
  int count = 0;
  if (api().comm_failed_ranks(comm, ranks.data(), static_cast<int>(ranks.size()), &count) !=
      CC_SUCCESS)
    return {};
  std::vector<int64_t> out;
  for (int i = 0; i < count && i < static_cast<int>(ranks.size()); ++i)
    out.push_back(ranks[static_cast<size_t>(i)]);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> CommState::not_failed(const std::vector<int64_t>& excluded,
                                           std::chrono::milliseconds wait) const {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const std::vector<int64_t> failed = failed_on(comm_);
    std::vector<int64_t> alive;
    for (const int64_t r : excluded)
      if (!std::binary_search(failed.begin(), failed.end(), r)) alive.push_back(r);
    if (alive.empty() || std::chrono::steady_clock::now() >= deadline) return alive;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::shared_ptr<CommState> CommState::shrink(const std::vector<int64_t>& excluded,
                                             bool abort_parent) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string who = text("cc backend (rank ", rank_, ") shrink: ");
  if (!can_shrink())
    fail(who + "the libcc loaded has no cc_comm_shrink; use a libcc as new as cc.torch");
  if (comm_ == nullptr)
    fail(who + (shut_ ? "the process group was shut down or aborted"
                      : "the process group has no communicator yet (its first operation makes "
                        "it), so none of its ranks can have failed") +
         "; cc's shrink leaves out ranks that failed");
  // cc's rendezvous decides who is left out: the ranks it found failed. On a
  // generation-0 communicator those are known before the shrink, so a rank
  // asked for that is alive is refused here rather than waited for until
  // the deadline.
  int generation = 0;
  const cc_result_t g = api().comm_generation(comm_, &generation);
  if (g != CC_SUCCESS) fail(who + words("cc_comm_generation", g));
  if (generation == 0) {
    const std::vector<int64_t> alive = not_failed(excluded, std::min(timeout_, kMostFailureWait));
    if (!alive.empty())
      fail(who + "rank(s) " + rank_words(alive) +
           " of the group did not fail as far as cc knows (its rendezvous found rank(s) " +
           rank_words(failed_on(comm_)) +
           " failed). cc's shrink leaves out ranks that failed, never one that is alive: call "
           "shrink_group with the ranks a DistBackendError named, after it was raised");
  }
  // SHRINK_ABORT: the parent's pending work is stopped first (as NCCL's
  // flag does); cc's shrink then builds on the aborted communicator, which
  // is its documented path (an abort does not give a rank up), and the
  // parent's destroy cannot wait on anyone.
  if (abort_parent) {
    shut_ = true;
    api().comm_abort(comm_);
  }
  c10::cuda::CUDAGuard guard(device_);
  cc_comm_t made = nullptr;
  const cc_result_t r = api().comm_shrink(comm_, 0, &made);
  if (r != CC_SUCCESS) fail(who + words("cc_comm_shrink", r));
  const auto drop = [&made] {
    api().comm_abort(made);
    api().comm_destroy(made);
  };
  // The ranks the new generation left out, in this group's numbering: the
  // same on every survivor, as the rendezvous decided them.
  const std::vector<int64_t> left_out = failed_on(made);
  if (left_out != excluded) {
    drop();
    fail(who + "cc's rendezvous left out rank(s) " + rank_words(left_out) +
         " (those that failed), but shrink_group was asked to exclude " + rank_words(excluded) +
         "; the new communicator was dropped. Pass every failed rank (those a DistBackendError "
         "named); now destroy the process group and start again");
  }
  int new_rank = -1;
  int new_size = 0;
  const cc_result_t rr = api().comm_rank(made, &new_rank);
  const cc_result_t rs = rr == CC_SUCCESS ? api().comm_size(made, &new_size) : rr;
  if (rs != CC_SUCCESS) {
    const std::string why = words("cc_comm_rank/cc_comm_size", rs);
    drop();
    fail(who + why);
  }
  // The server this process hosts serves the new generation: it moves with it.
  Rendezvous next = rendezvous_;
  rendezvous_.server = nullptr;
  return std::make_shared<CommState>(new_rank, new_size, std::move(next), made, device_);
}

}  // namespace cc_torch
