// The shared rendezvous token kept in a file: the daemon's --token-file,
// `cc-rendezvous status --token-file`, and CC_RENDEZVOUS_TOKEN_FILE of every
// rank and tool. One reader, so one file gives one token everywhere.
#pragma once

#include <string>
#include <string_view>

#include "common/status.hpp"

namespace cc {

// The token is the file's bytes without trailing whitespace (spaces, tabs,
// CR and LF): "s3cret \n" and "s3cret" are one token. `from` says where
// the path came from in the words ("CC_RENDEZVOUS_TOKEN_FILE",
// "--token-file"; empty: nowhere to name). CC_ERR_INVALID_ARGUMENT with
// words when the file cannot be read or holds no token; warns in the log
// when group or others may read it.
Status read_token_file(const std::string& path, std::string_view from, std::string* token);

// The token of a file's contents, as read_token_file takes it.
std::string token_of(std::string contents);

}  // namespace cc
