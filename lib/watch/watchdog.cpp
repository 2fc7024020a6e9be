#include "lib/watch/watchdog.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/log.hpp"

namespace cc::watch {

Watchdog& Watchdog::instance() {
  static Watchdog* dog = [] {
    auto* d = new Watchdog();
    // A program that exits with communicators alive: stop ticking before
    // static destructors take away what a tick uses.
    std::atexit([] { instance().shutdown(); });
    return d;
  }();
  return *dog;
}

void Watchdog::shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  watched_.clear();
  running_id_ = 0;
  cv_.notify_all();
  std::thread t = std::move(thread_);
  lock.unlock();
  if (!t.joinable()) return;
  if (t.get_id() == std::this_thread::get_id())
    t.detach();  // exit() called from a tick
  else
    t.join();
}

bool Watchdog::enabled(const settings::Getenv& getenv) {
  const char* v = settings::find(settings::Id::watchdog, getenv).value;
  if (v == nullptr) return true;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "false") == 0);
}

void Watchdog::add(Watched* w) {
  std::unique_lock<std::mutex> lock(mu_);
  watched_.push_back(w);
  if (running_id_ != 0) return;
  // A thread of an earlier run may still be finishing: wait for it.
  if (thread_.joinable()) {
    std::thread old = std::move(thread_);
    lock.unlock();
    old.join();
    lock.lock();
  }
  if (running_id_ != 0 || thread_.joinable()) return;  // another add started one meanwhile
  running_id_ = next_id_++;
  thread_ = std::thread([this, id = running_id_] { loop(id); });
}

void Watchdog::remove(Watched* w) {
  std::unique_lock<std::mutex> lock(mu_);  // waits for a tick in progress
  watched_.erase(std::remove(watched_.begin(), watched_.end(), w), watched_.end());
  if (!watched_.empty() || running_id_ == 0) return;
  running_id_ = 0;
  cv_.notify_all();
  std::thread t = std::move(thread_);
  lock.unlock();
  if (t.joinable()) t.join();  // never from a tick: ticks hold mu_
}

bool Watchdog::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_id_ != 0;
}

size_t Watchdog::watched_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watched_.size();
}

void Watchdog::loop(uint64_t id) {
  log().debug("watchdog started");
  std::unique_lock<std::mutex> lock(mu_);
  while (running_id_ == id) {
    const auto now = std::chrono::steady_clock::now();
    for (Watched* w : watched_) {
      try {
        w->watch_tick(now);
      } catch (const std::exception& e) {
        log().error("watchdog: a check failed: {}", e.what());
      }
    }
    cv_.wait_until(lock, now + kTick, [&] { return running_id_ != id; });
  }
  log().debug("watchdog stopped");
}

}  // namespace cc::watch
