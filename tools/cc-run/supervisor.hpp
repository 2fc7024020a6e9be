// Supervising the ranks of this node until the job ends: what happens when
// a rank ends (a failed one stops the others after the grace period, or,
// with --max-restarts, is started again while restarts are left), what a
// signal to cc-run does (passed on to the ranks; a second one kills them),
// and cc-run's exit status.
#pragma once

#include <sys/types.h>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <vector>

#include "tools/cc-run/output_relay.hpp"
#include "tools/cc-run/rank_process.hpp"
#include "tools/cc-run/run_options.hpp"
#include "tools/cc-run/signals.hpp"

namespace cc::tools::run {

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // waitpid status once exited
};

// Starts a rank again after it failed, with the job's restart count; 0 or an
// errno.
using Restart = std::function<int(const Rank&, int restart, StartedRank* out)>;
// A rank's process ended, with its waitpid status (told before any restart).
using OnExit = std::function<void(const Rank&, int status)>;

class Supervisor {
 public:
  // Watches cc-run's signals from here on.
  Supervisor(const Options& o, Restart restart);

  // A rank started as `started`; its output is relayed from here on.
  void add(int rank, const StartedRank& started);

  // For a start that cannot go on: SIGKILL to every rank added, then waits for
  // them.
  void kill_all();

  // Where cc-run's other work (the node agent) runs beside the ranks.
  asio::io_context& io() { return io_; }
  void on_exit(OnExit f) { on_exit_ = std::move(f); }

  // Runs until every rank has ended and its output is relayed (or a second
  // after, while a rank's children still hold it); returns cc-run's exit
  // status.
  int run();

 private:
  void on_signal(int sig);
  void reap();
  void failed(Rank& r, int status);
  void survive(Rank& r, int status);
  void check_done();
  void stop_others_after_grace();
  void kill_after(std::chrono::steady_clock::time_point when);
  void tick();
  std::vector<pid_t> pids() const;
  size_t slot_of(const Rank& r) const { return static_cast<size_t>(&r - ranks_.data()); }

  const Options& o_;
  const std::chrono::milliseconds grace_;
  asio::io_context io_;
  OutputRelay relay_;
  Signals signals_;
  std::vector<Rank> ranks_;
  Restart restart_;
  OnExit on_exit_;
  asio::steady_timer term_timer_, kill_timer_, drain_timer_, tick_timer_;
  bool draining_ = false;
  int failed_ = -1;      // index of the first rank that failed (and was not started again)
  int stop_signal_ = 0;  // a signal cc-run was asked to stop with
  int restarts_ = 0;     // ranks started again so far (--max-restarts)
};

}  // namespace cc::tools::run
