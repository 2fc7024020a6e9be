// SIGUSR1 asks every communicator of the process to write its flight
// recorder. The handler only counts the request; the watchdog thread, which
// a rank stuck in a collective does not hold, writes the files at its next
// tick.
#pragma once

#include <cstdint>

namespace cc::watch {

// Installs the handler once, and only where SIGUSR1 has its default action
// (the application's own handler is left alone). Returns whether cc's
// handler is in place.
bool install_trace_signal();
// How many times SIGUSR1 arrived since the handler was installed.
uint64_t trace_requests();

}  // namespace cc::watch
