// common/sigpipe_blocked.hpp: a write to a pipe nobody reads, with SIGPIPE at
// its default action (as cc-run's ranks have it), fails with EPIPE inside the
// guard instead of killing the process, and leaves nothing pending behind.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>

#include "common/sigpipe_blocked.hpp"

namespace {

bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  REQUIRE(sigpending(&pending) == 0);
  return sigismember(&pending, SIGPIPE) == 1;
}

bool sigpipe_blocked_now() {
  sigset_t now;
  REQUIRE(pthread_sigmask(SIG_BLOCK, nullptr, &now) == 0);
  return sigismember(&now, SIGPIPE) == 1;
}

}  // namespace

TEST_CASE("a write to a closed pipe fails with EPIPE and the process lives") {
  REQUIRE(::signal(SIGPIPE, SIG_DFL) != SIG_ERR);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[0]);  // nobody reads
  for (int i = 0; i < 3; ++i) {
    errno = 0;
    ssize_t n = 0;
    {
      const cc::SigpipeBlocked guard;
      n = ::write(fds[1], "x", 1);
    }
    CHECK(n == -1);
    CHECK(errno == EPIPE);
    CHECK_FALSE(sigpipe_pending());
    CHECK_FALSE(sigpipe_blocked_now());  // the thread's mask is as it was
  }
  ::close(fds[1]);
}

TEST_CASE("a SIGPIPE pending before the guard is left for the program") {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr) == 0);
  REQUIRE(::pthread_kill(::pthread_self(), SIGPIPE) == 0);
  REQUIRE(sigpipe_pending());
  { const cc::SigpipeBlocked guard; }
  CHECK(sigpipe_pending());
  CHECK(sigpipe_blocked_now());  // blocked before, blocked after
  const timespec now{0, 0};
  CHECK(sigtimedwait(&pipe_only, nullptr, &now) == SIGPIPE);
  REQUIRE(pthread_sigmask(SIG_UNBLOCK, &pipe_only, nullptr) == 0);
}
