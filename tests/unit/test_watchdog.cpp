// The process's watchdog thread: one for every watched object, started with
// the first and stopped with the last; remove() waits for a tick in progress.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "lib/watch/watchdog.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Counter final : cc::watch::Watched {
  std::atomic<int> ticks{0};
  std::atomic<bool> inside{false};
  std::chrono::milliseconds tick_cost{0};
  void watch_tick(Clock::time_point) override {
    inside = true;
    std::this_thread::sleep_for(tick_cost);
    ++ticks;
    inside = false;
  }
};

bool wait_for(const std::function<bool()>& ok, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (!ok()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

TEST_CASE("the watchdog runs while something is watched, and only then") {
  auto& dog = cc::watch::Watchdog::instance();
  REQUIRE_FALSE(dog.running());
  Counter a, b;
  dog.add(&a);
  CHECK(dog.running());
  dog.add(&b);
  CHECK(dog.watched_count() == 2);
  // Ticks every 10 ms: 5 ticks well within a second.
  CHECK(wait_for([&] { return a.ticks >= 5 && b.ticks >= 5; }, 2000ms));
  dog.remove(&a);
  const int a_after = a.ticks;
  CHECK(dog.running());
  std::this_thread::sleep_for(50ms);
  CHECK(a.ticks == a_after);  // never again after remove
  CHECK(b.ticks > 5);
  dog.remove(&b);
  CHECK_FALSE(dog.running());
  CHECK(dog.watched_count() == 0);
  // And again: a second communicator later starts a fresh thread.
  Counter c;
  dog.add(&c);
  CHECK(wait_for([&] { return c.ticks >= 2; }, 2000ms));
  dog.remove(&c);
  CHECK_FALSE(dog.running());
}

TEST_CASE("remove waits for a tick in progress") {
  auto& dog = cc::watch::Watchdog::instance();
  Counter slow;
  slow.tick_cost = 100ms;
  dog.add(&slow);
  REQUIRE(wait_for([&] { return slow.inside.load(); }, 2000ms));
  dog.remove(&slow);
  CHECK_FALSE(slow.inside);
  CHECK_FALSE(dog.running());
}

TEST_CASE("add and remove from many threads at once") {
  auto& dog = cc::watch::Watchdog::instance();
  std::vector<Counter> counters(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        dog.add(&counters[static_cast<size_t>(t)]);
        dog.add(&counters[static_cast<size_t>(t + 8)]);
        std::this_thread::sleep_for(1ms);
        dog.remove(&counters[static_cast<size_t>(t + 8)]);
        dog.remove(&counters[static_cast<size_t>(t)]);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(dog.watched_count() == 0);
  CHECK_FALSE(dog.running());
}

TEST_CASE("CC_WATCHDOG=0 turns the watchdog off") {
  auto env = [](const char* value) {
    return [value](const char* name) -> const char* {
      return std::strcmp(name, "CC_WATCHDOG") == 0 ? value : nullptr;
    };
  };
  CHECK(cc::watch::Watchdog::enabled(env(nullptr)));
  CHECK(cc::watch::Watchdog::enabled(env("1")));
  CHECK_FALSE(cc::watch::Watchdog::enabled(env("0")));
  CHECK_FALSE(cc::watch::Watchdog::enabled(env("off")));
}
