#include "tools/cc-run/signals.hpp"

#include <signal.h>

namespace cc::tools::run {

Signals::Signals(asio::io_context& io, std::function<void(int)> on_signal)
    : set_(io, SIGINT, SIGTERM, SIGHUP), on_signal_(std::move(on_signal)) {
  set_.add(SIGCHLD);
  ::signal(SIGPIPE, SIG_IGN);
  wait();
}

void Signals::wait() {
  set_.async_wait([this](std::error_code ec, int sig) {
    if (ec) return;  // the set was cancelled: cc-run is done
    on_signal_(sig);
    wait();
  });
}

}  // namespace cc::tools::run
