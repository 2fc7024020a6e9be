// The pause between retries, one policy for every retry loop of cc: it
// starts at 10 ms and doubles up to 500 ms, each pause lengthened by a random
// jitter of up to half of it, so that ranks that failed together do not
// retry together; never past the caller's deadline.
#pragma once

#include <chrono>
#include <random>

namespace cc {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kFirst{10};
  static constexpr std::chrono::milliseconds kMax{500};

  Backoff();

  // The next pause, not past `deadline`; the one after it is twice as long.
  Clock::duration next(Clock::time_point deadline);

  // Sleeps the next pause; false (at once) when `deadline` has passed.
  bool sleep_until_next(Clock::time_point deadline);

 private:
  std::chrono::milliseconds step_ = kFirst;
  std::minstd_rand rng_;
};

}  // namespace cc
