#include "lib/core/late_abort.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

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

// The aborts that wait for CUDA graphs, each on a detached thread.
class GraphAborts {
 public:
  static GraphAborts& instance() {
    static GraphAborts one;
    return one;
  }

  void add(ncclComm_t nccl, int device, std::shared_ptr<const std::atomic<int>> graphs) {
    auto job = std::make_shared<Job>();
    job->graphs = std::move(graphs);
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(),
                                 [](const auto& j) { return j->done.load(); }),
                  jobs_.end());
      jobs_.push_back(job);
    }
    try {
      std::thread([job, nccl, device] {
        if (device >= 0) cudaSetDevice(device);
        ncclCommAbort(nccl);
        job->done.store(true, std::memory_order_release);
      }).detach();
    } catch (const std::system_error& e) {
      job->done.store(true, std::memory_order_release);
      log().error("no thread for NCCL's abort ({}): the NCCL communicator is left as it is",
                  e.what());
    }
  }

  ~GraphAborts() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& j : jobs_)
      while (!j->done.load(std::memory_order_acquire) &&
             j->graphs->load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  struct Job {
    std::shared_ptr<const std::atomic<int>> graphs;
    std::atomic<bool> done{false};
  };
  std::mutex mu_;
  std::vector<std::shared_ptr<Job>> jobs_;
};

}  // namespace

void abort_later(ncclComm_t nccl, int device) {
  if (nccl != nullptr) LateAborts::instance().add(nccl, device);
}

void abort_after_graphs(ncclComm_t nccl, int device,
                        std::shared_ptr<const std::atomic<int>> graphs) {
  if (nccl != nullptr) GraphAborts::instance().add(nccl, device, std::move(graphs));
}

}  // namespace cc::core
