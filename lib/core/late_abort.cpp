#include "lib/core/late_abort.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include <cuda_runtime_api.h>

#include "common/log.hpp"

namespace cc::core {
namespace {

class LateAborts {
 public:
  static LateAborts& instance() {
    static LateAborts one;
    return one;
  }

  void add(ncclComm_t nccl, int device) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(nccl, device);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    wake_.notify_all();
  }

  ~LateAborts() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      wake_.notify_all();
    }
    if (thread_.joinable()) thread_.join();  // what is queued is aborted first
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      auto [nccl, device] = queue_.front();
      queue_.pop_front();
      lock.unlock();
      const auto start = std::chrono::steady_clock::now();
      if (device >= 0) cudaSetDevice(device);
      ncclCommAbort(nccl);
      log().debug("ncclCommAbort of a failed communicator's NCCL communicator took {} ms, "
                  "in the background",
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count());
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<ncclComm_t, int>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

void abort_later(ncclComm_t nccl, int device) {
  if (nccl != nullptr) LateAborts::instance().add(nccl, device);
}

}  // namespace cc::core
