// The shared rendezvous token kept in a file: the daemon's --token-file,
// `cc-rendezvous status --token-file`, and CC_RENDEZVOUS_TOKEN_FILE of every
// rank and tool. One reader, so one file gives one token everywhere.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace cc {

// The token is the file's bytes without trailing whitespace (spaces, tabs,
// CR and LF): "s3cret \n" and "s3cret" are one token. `from` says where
// the path came from in the message ("CC_RENDEZVOUS_TOKEN_FILE",
// "--token-file"; empty: nowhere to name). CC_ERR_INVALID_ARGUMENT with
// a message when the file cannot be read or holds no token; warns in the log
// when group or others may read it.
Status read_token_file(const std::string& path, std::string_view from, std::string* token);

// The token of a file's contents, as read_token_file takes it.
std::string token_of(std::string contents);

// A server's tokens: one per job prefix, and the admin token.
struct JobToken {
  std::string prefix;  // the jobs whose id starts with it
  std::string token;
};
struct Tokens {
  std::string admin;           // opens every job, and status shows it every job
  std::vector<JobToken> jobs;  // the longest matching prefix wins
  bool empty() const { return admin.empty() && jobs.empty(); }
  // The job token for `job` (its longest matching prefix), or null.
  const JobToken* for_job(std::string_view job) const;
};
const JobToken* longest_prefix(const std::vector<JobToken>& tokens, std::string_view job);

// The most job lines a token table may hold.
inline constexpr size_t kMaxJobTokens = 4096;

// The daemon's --token-file. A file whose lines (blank lines and lines
// starting with '#' aside) each read "job PREFIX TOKEN" or "admin TOKEN" is
// a table of tokens; any other file holds one token, the admin token, as
// read_token_file reads it. Errors name the file and the line.
Status read_tokens(const std::string& path, std::string_view from, Tokens* tokens);

// The tokens of a file's contents, as read_tokens takes them; `named` is the
// file as error messages name it.
Status tokens_of(const std::string& contents, const std::string& named, Tokens* tokens);

}  // namespace cc
