#include "rendezvous/etcd/create_confirmation.hpp"

#include <utility>

namespace cc::rv::etcd {

namespace {
constexpr std::chrono::milliseconds kStopAgain{5};  // the socket may not be open yet
}  // namespace

CreateConfirmation::CreateConfirmation(size_t creates, std::chrono::milliseconds grace,
                                       std::function<void()> stop)
    : creates_(creates), grace_(grace), stop_(std::move(stop)) {
  // One create is decoded before anything is answered: nothing to confirm.
  if (creates_ > 1) thread_ = std::thread([this] { run(); });
}

CreateConfirmation::~CreateConfirmation() { (void)finish(); }

void CreateConfirmation::begin() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    begun_ = true;
  }
  cv_.notify_all();
}

void CreateConfirmation::confirmed(size_t created) {
  if (created < creates_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    settled_ = true;
  }
  cv_.notify_all();
}

bool CreateConfirmation::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    settled_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return expired_;
}

void CreateConfirmation::run() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return begun_ || settled_; });
  if (cv_.wait_for(lock, grace_, [&] { return settled_; })) return;
  expired_ = true;
  while (!settled_) {
    lock.unlock();  // stop_ takes the connection's own lock
    stop_();
    lock.lock();
    cv_.wait_for(lock, kStopAgain, [&] { return settled_; });
  }
}

}  // namespace cc::rv::etcd
