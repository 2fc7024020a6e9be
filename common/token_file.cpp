#include "common/token_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/log.hpp"
#include "common/return_if_error.hpp"

namespace cc {

std::string token_of(std::string contents) {
  while (!contents.empty() && (contents.back() == '\n' || contents.back() == '\r' ||
                               contents.back() == ' ' || contents.back() == '\t'))
    contents.pop_back();
  return contents;
}

namespace {

std::string named_file(const std::string& path, std::string_view from) {
  return "the token file '" + path + "'" + (from.empty() ? "" : " (from " + std::string(from) + ")");
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool is_table_line(const std::vector<std::string>& w) {
  return (w.size() == 3 && w[0] == "job") || (w.size() == 2 && w[0] == "admin");
}

}  // namespace

const JobToken* Tokens::for_job(std::string_view job) const { return longest_prefix(jobs, job); }

const JobToken* longest_prefix(const std::vector<JobToken>& tokens, std::string_view job) {
  const JobToken* best = nullptr;
  for (const JobToken& t : tokens)
    if (job.starts_with(t.prefix) && (best == nullptr || t.prefix.size() > best->prefix.size()))
      best = &t;
  return best;
}

Status tokens_of(const std::string& contents, const std::string& named, Tokens* tokens) {
  std::vector<std::pair<int, std::vector<std::string>>> lines;
  bool table = false;
  {
    std::istringstream in(contents);
    int number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      auto w = words_of(line);
      if (w.empty() || w[0].starts_with("#")) continue;
      if (is_table_line(w)) table = true;
      lines.emplace_back(number, std::move(w));
    }
  }
  Tokens out;
  if (!table) {
    out.admin = token_of(contents);
    if (out.admin.empty())
      return make_status(CC_ERR_INVALID_ARGUMENT, named + " is empty: put the shared token in it");
    *tokens = std::move(out);
    return Status::success();
  }
  for (auto& [number, w] : lines) {
    const std::string where = named + ", line " + std::to_string(number);
    if (!is_table_line(w))
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         where + ": a table of tokens has lines \"job PREFIX TOKEN\" and "
                                 "\"admin TOKEN\" only (and # comments)");
    if (w[0] == "admin") {
      if (!out.admin.empty())
        return make_status(CC_ERR_INVALID_ARGUMENT, where + ": a second admin line; keep one");
      out.admin = w[1];
      continue;
    }
    for (const JobToken& t : out.jobs)
      if (t.prefix == w[1])
        return make_status(CC_ERR_INVALID_ARGUMENT,
                           where + ": the prefix '" + w[1] + "' has a token already; keep one");
    if (out.jobs.size() == kMaxJobTokens)
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         where + ": more than " + std::to_string(kMaxJobTokens) +
                             " job lines; give jobs that belong together one prefix");
    out.jobs.push_back({w[1], w[2]});
  }
  *tokens = std::move(out);
  return Status::success();
}

Status read_tokens(const std::string& path, std::string_view from, Tokens* tokens) {
  std::string contents;
  CC_RETURN_IF_ERROR(read_token_file(path, from, &contents));
  return tokens_of(contents, named_file(path, from), tokens);
}

Status read_token_file(const std::string& path, std::string_view from, std::string* token) {
  const std::string named = named_file(path, from);
  if (path.empty()) {
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       (from.empty() ? std::string("the token file") : std::string(from)) +
                           " is empty: give the path of a file holding the token");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "cannot read " + named + ": " + std::strerror(err) +
                           "; check the path and that this user may read it");
  }
  std::ostringstream content;
  content << in.rdbuf();
  std::string t = token_of(content.str());
  if (t.empty()) {
    return make_status(CC_ERR_INVALID_ARGUMENT, named + " is empty: put the shared token in it");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    log().warn("the token file '{}' can be read by other users (mode {:o}): chmod 600 it", path,
               st.st_mode & 0777);
  }
  *token = std::move(t);
  return Status::success();
}

}  // namespace cc
