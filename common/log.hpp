// The library's one named logger, "cc". Never registered as the default and
// never reconfigured globally: the host program's logging stays its own. If
// the host registered a logger named "cc", that one is used.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace cc {

// The "cc" logger; level from CC_LOG_LEVEL (trace, debug, info, warn, error,
// off; default warn) the first time it is made.
spdlog::logger& log();

// Puts "rank R host H" into this library's log pattern once they are known.
void log_set_identity(int rank, const std::string& host);

}  // namespace cc
