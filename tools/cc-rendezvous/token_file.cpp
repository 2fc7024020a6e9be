#include "tools/cc-rendezvous/token_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/log.hpp"

namespace cc::daemon {

bool read_token(const std::string& path, std::string* token, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read the token file " + path + ": " + std::strerror(errno) +
             "; check the path and that this user may read it";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  if (t.empty()) {
    *error = "the token file " + path + " is empty; put the shared token in it";
    return false;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    log().warn("the token file {} can be read by group or others (mode {:o}); chmod 600 it", path,
               st.st_mode & 0777);
  *token = std::move(t);
  return true;
}

}  // namespace cc::daemon
