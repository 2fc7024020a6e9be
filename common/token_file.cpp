#include "common/token_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/log.hpp"

namespace cc {

std::string token_of(std::string contents) {
  while (!contents.empty() && (contents.back() == '\n' || contents.back() == '\r' ||
                               contents.back() == ' ' || contents.back() == '\t'))
    contents.pop_back();
  return contents;
}

Status read_token_file(const std::string& path, std::string_view from, std::string* token) {
  const std::string named =
      "the token file '" + path + "'" + (from.empty() ? "" : " (from " + std::string(from) + ")");
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
