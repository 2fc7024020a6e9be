#include "lib/watch/trace_signal.hpp"

#include <atomic>
#include <csignal>
#include <mutex>

namespace cc::watch {
namespace {

// Lock-free, so the signal handler may touch it.
std::atomic<uint64_t> requests{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

extern "C" void on_sigusr1(int) { requests.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

bool install_trace_signal() {
  static std::once_flag once;
  static bool installed = false;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
        (current.sa_flags & SA_SIGINFO) != 0)
      return;
    struct sigaction mine {};
    mine.sa_handler = on_sigusr1;
    sigemptyset(&mine.sa_mask);
    mine.sa_flags = SA_RESTART;
    installed = sigaction(SIGUSR1, &mine, nullptr) == 0;
  });
  return installed;
}

uint64_t trace_requests() { return requests.load(std::memory_order_relaxed); }

}  // namespace cc::watch
