// The signals cc-run acts on, through Asio's signal_set: SIGINT, SIGTERM and
// SIGHUP (passed on to the ranks) and SIGCHLD (a rank ended). SIGPIPE is
// ignored: a reader that went away must not end cc-run.
#pragma once

#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <functional>

namespace cc::tools::run {

class Signals {
 public:
  // `on_signal` is called on the io_context's thread for each one that arrives.
  Signals(asio::io_context& io, std::function<void(int)> on_signal);

 private:
  void wait();

  asio::signal_set set_;
  std::function<void(int)> on_signal_;
};

}  // namespace cc::tools::run
