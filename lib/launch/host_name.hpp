// This machine's host name, as messages about a rank spell it.
#pragma once

#include <string>

namespace cc::launch {

// This machine's host name ("unknown-host" if it cannot be read).
std::string host_name();

}  // namespace cc::launch
