// The daemon's token file: read at start and again on SIGHUP, and by
// `cc-rendezvous status` to authenticate.
#pragma once

#include <string>

namespace cc::daemon {

// Reads the token without its trailing newline. False with words when the
// file cannot be read or is empty; warns when group or others may read it.
bool read_token(const std::string& path, std::string* token, std::string* error);

}  // namespace cc::daemon
