#pragma once
// Keeps a write to a socket whose peer has gone from killing the process.
//
// A library that writes to sockets through code it does not own (cpp-httplib
// sends without MSG_NOSIGNAL) cannot rely on the program ignoring SIGPIPE:
// cc-run gives its ranks the default action, as a shell does, and so do most
// launchers. While one of these lives, SIGPIPE is blocked in this thread; a
// SIGPIPE raised meanwhile (a thread-directed signal, pending on this thread)
// is taken away before the old mask comes back, so the write fails with EPIPE
// instead. One that was already pending before is left for the program.
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>

namespace cc {

class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    const int saved_errno = errno;  // the failed write's, for whoever reads it next
    if (!was_pending_) {
      const timespec now{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &now) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = saved_errno;
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

}  // namespace cc
