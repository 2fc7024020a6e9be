#include "common/backoff.hpp"

#include <unistd.h>

#include <algorithm>
#include <thread>

namespace cc {

Backoff::Backoff()
    : rng_(static_cast<unsigned>(::getpid()) ^
           static_cast<unsigned>(Clock::now().time_since_epoch().count())) {}

Backoff::Clock::duration Backoff::next(Clock::time_point deadline) {
  const auto jitter = std::chrono::milliseconds(rng_() % (step_.count() / 2 + 1));
  const auto left = std::max<Clock::duration>(deadline - Clock::now(), Clock::duration::zero());
  const auto pause = std::min<Clock::duration>(step_ + jitter, left);
  step_ = std::min(step_ * 2, kMax);
  return pause;
}

bool Backoff::sleep_until_next(Clock::time_point deadline) {
  if (Clock::now() >= deadline) return false;
  std::this_thread::sleep_for(next(deadline));
  return true;
}

}  // namespace cc
