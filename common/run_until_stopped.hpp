// An event loop's thread: runs `io` (an Asio io_context, standalone or
// Boost's) until it is stopped. An exception a handler lets out is logged and
// the loop goes on, so one bad connection never ends the service.
#pragma once

#include <exception>

#include "common/log.hpp"

namespace cc {

template <class IoContext>
void run_until_stopped(IoContext& io, const char* what) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      log().error("{}: unexpected error, going on: {}", what, e.what());
    }
  }
}

}  // namespace cc
