#include "tools/cc-run/supervisor.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cc::tools::run {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kDrainAfterExit{1000};
// Ends are also looked for at this pace, not only on SIGCHLD.
constexpr milliseconds kTick{200};

}  // namespace

Supervisor::Supervisor(const Options& o, Restart restart)
    : o_(o),
      grace_(o.grace_ms),
      relay_(io_, [this] { check_done(); }),
      signals_(io_, [this](int sig) { on_signal(sig); }),
      restart_(std::move(restart)),
      term_timer_(io_),
      kill_timer_(io_),
      drain_timer_(io_),
      tick_timer_(io_) {}

void Supervisor::add(int rank, const StartedRank& started) {
  Rank r;
  r.rank = rank;
  r.pid = started.pid;
  r.running = true;
  ranks_.push_back(r);
  relay_.relay(ranks_.size() - 1, rank, started.out_fd, started.err_fd);
}

void Supervisor::kill_all() {
  signal_groups(pids(), SIGKILL);
  for (const Rank& r : ranks_) ::waitpid(r.pid, nullptr, 0);
}

int Supervisor::run() {
  tick();
  reap();  // a rank may have ended before the signals were watched
  io_.run();
  relay_.flush_all();
  signal_groups(pids(), SIGKILL);  // whatever a rank left behind in its group
  if (stop_signal_ != 0) return 128 + stop_signal_;
  if (failed_ >= 0) return exit_code_of(ranks_[static_cast<size_t>(failed_)].status);
  return 0;
}

std::vector<pid_t> Supervisor::pids() const {
  std::vector<pid_t> out;
  for (const Rank& r : ranks_) out.push_back(r.pid);
  return out;
}

void Supervisor::tick() {
  tick_timer_.expires_after(kTick);
  tick_timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    reap();
    tick();
  });
}

void Supervisor::on_signal(int sig) {
  if (sig == SIGCHLD) return reap();
  if (stop_signal_ == 0) {
    std::fprintf(stderr, "cc-run: got %s; passing it to the ranks\n", ::strsignal(sig));
    stop_signal_ = sig;
    kill_after(Clock::now() + 2 * grace_);
  } else {
    std::fprintf(stderr, "cc-run: got %s again; killing the ranks\n", ::strsignal(sig));
    kill_after(Clock::now());
  }
  signal_groups(pids(), sig == SIGHUP ? SIGTERM : sig);
}

void Supervisor::kill_after(Clock::time_point when) {
  kill_timer_.expires_at(when);
  kill_timer_.async_wait([this](std::error_code ec) {
    if (!ec) signal_groups(pids(), SIGKILL);
  });
}

void Supervisor::stop_others_after_grace() {
  term_timer_.expires_after(grace_);
  term_timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    signal_groups(pids(), SIGTERM);
    kill_after(Clock::now() + grace_);
  });
}

void Supervisor::reap() {
  for (Rank& r : ranks_) {
    if (!r.running) continue;
    int status = 0;
    if (::waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
    r.running = false;
    r.status = status;
    if (on_exit_) on_exit_(r, status);
    const bool bad = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (bad && o_.max_restarts >= 0 && stop_signal_ == 0)
      survive(r, status);
    else if (bad && failed_ < 0 && stop_signal_ == 0)
      failed(r, status);
  }
  check_done();
}

void Supervisor::failed(Rank& r, int status) {
  failed_ = static_cast<int>(slot_of(r));
  const bool others =
      std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& x) { return x.running; });
  relay_.flush(slot_of(r),
               false);  // what the rank said before its death is announced
  std::fprintf(stderr, "cc-run: rank %d (pid %d) exited with %s%s\n", r.rank,
               static_cast<int>(r.pid), describe_status(status).c_str(),
               others ? "; stopping the other ranks" : "");
  std::fflush(stderr);
  if (others) stop_others_after_grace();
}

// --max-restarts: a failed rank is started again while restarts are left;
// the others run on either way.
void Supervisor::survive(Rank& r, int status) {
  relay_.flush(slot_of(r), true);
  ::kill(-r.pid, SIGKILL);  // what the rank left behind in its group
  const pid_t old = r.pid;
  if (restarts_ < o_.max_restarts) {
    ++restarts_;
    std::fprintf(stderr,
                 "cc-run: rank %d (pid %d) exited with %s; starting it again "
                 "(restart %d of %d)\n",
                 r.rank, static_cast<int>(old), describe_status(status).c_str(), restarts_,
                 o_.max_restarts);
    std::fflush(stderr);
    StartedRank started;
    const int err = restart_(r, restarts_, &started);
    if (err == 0) {
      r.pid = started.pid;
      r.running = true;
      relay_.relay(slot_of(r), r.rank, started.out_fd, started.err_fd);
      return;
    }
    std::fprintf(stderr, "cc-run: cannot start rank %d again: %s\n", r.rank, std::strerror(err));
  } else {
    std::fprintf(stderr,
                 "cc-run: rank %d (pid %d) exited with %s; no restart left (%d "
                 "used); the other "
                 "ranks run on\n",
                 r.rank, static_cast<int>(old), describe_status(status).c_str(), restarts_);
  }
  std::fflush(stderr);
  if (failed_ < 0) failed_ = static_cast<int>(slot_of(r));
}

// Done once no rank runs and their output has ended, or a second after the
// last rank ended while its children still hold the output.
void Supervisor::check_done() {
  if (std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; })) return;
  if (!relay_.any_open()) {
    io_.stop();
    return;
  }
  if (draining_) return;
  draining_ = true;
  drain_timer_.expires_after(kDrainAfterExit);
  drain_timer_.async_wait([this](std::error_code ec) {
    if (!ec) io_.stop();
  });
}

}  // namespace cc::tools::run
