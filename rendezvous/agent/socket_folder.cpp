#include "rendezvous/agent/socket_folder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <utility>

#include "common/log.hpp"

namespace cc::rv::agent {

namespace {

constexpr const char* kPrefix = "cc-agent-";
constexpr const char* kLockName = "/lock";

std::string parent_folder() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? std::string(tmp) : "/tmp";
}

// Removes the files of an agent's folder (its socket, its lock), then the folder.
void remove_folder(const std::string& path) {
  if (DIR* d = ::opendir(path.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") ::unlink((path + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

// Whether some process holds the folder's lock. A folder without a lock file
// is being made right now (mkdtemp, then the lock), unless it is old.
bool held(const std::string& path, const struct stat& folder) {
  const int fd = ::open((path + kLockName).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ::time(nullptr) - folder.st_mtime < 60;
  const bool locked = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // also drops the lock, if this call took it
  return locked;
}

}  // namespace

int SocketFolder::remove_stale(const std::string& parent) {
  DIR* d = ::opendir(parent.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  const uid_t me = ::geteuid();
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string path = parent + "/" + name;
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != me) continue;
    if (held(path, st)) continue;
    remove_folder(path);
    ++removed;
  }
  ::closedir(d);
  return removed;
}

Status SocketFolder::make(SocketFolder* out) {
  const std::string parent = parent_folder();
  if (const int n = remove_stale(parent); n > 0)
    log().info("removed {} node agent folder(s) in {} left by a cc-run that did not end cleanly",
               n, parent);
  std::string pattern = parent + "/" + kPrefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    return make_status(CC_ERR_SYSTEM, "cannot make a folder for the node agent's socket (" +
                                          pattern + "): " + std::strerror(errno) +
                                          "; set TMPDIR to a writable folder");
  SocketFolder f;
  f.path_ = pattern;
  f.lock_fd_ = ::open((pattern + kLockName).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (f.lock_fd_ < 0 || ::flock(f.lock_fd_, LOCK_EX | LOCK_NB) != 0)
    return make_status(CC_ERR_SYSTEM, "cannot lock the node agent's folder " + pattern + ": " +
                                          std::strerror(errno) +
                                          "; set TMPDIR to a local folder that supports flock");
  *out = std::move(f);
  return Status::success();
}

SocketFolder::SocketFolder(SocketFolder&& other) noexcept
    : path_(std::exchange(other.path_, {})), lock_fd_(std::exchange(other.lock_fd_, -1)) {}

SocketFolder& SocketFolder::operator=(SocketFolder&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::exchange(other.path_, {});
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

SocketFolder::~SocketFolder() { release(); }

void SocketFolder::release() {
  if (!path_.empty()) remove_folder(path_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
  path_.clear();
  lock_fd_ = -1;
}

}  // namespace cc::rv::agent
