// The process's one watchdog thread: started with the first watched
// communicator, stopped with the last. Every tick it calls each watched
// object's watch_tick(); what a tick checks (control channel, NCCL errors,
// in-flight operations) is the watched object's business. No CUDA here.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "common/settings.hpp"

namespace cc::watch {

class Watched {
 public:
  virtual ~Watched() = default;
  // Runs on the watchdog thread, one watched object at a time.
  virtual void watch_tick(std::chrono::steady_clock::time_point now) = 0;
};

class Watchdog {
 public:
  static constexpr std::chrono::milliseconds kTick{10};

  // The process-wide instance (never destroyed: a rank may exit with
  // communicators still alive).
  static Watchdog& instance();
  // CC_WATCHDOG=0 turns the watchdog (and heartbeats) off; anything else, or
  // unset, leaves it on.
  static bool enabled(const settings::Getenv& getenv = settings::process_env());

  void add(Watched* w);
  // After remove returns, w's watch_tick is not running and never runs again.
  void remove(Watched* w);
  // Forgets everything watched and stops the thread (at exit).
  void shutdown();
  bool running() const;
  size_t watched_count() const;

 private:
  void loop(uint64_t id);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Watched*> watched_;
  std::thread thread_;
  uint64_t running_id_ = 0;  // the thread whose id this is keeps running
  uint64_t next_id_ = 1;
};

}  // namespace cc::watch
