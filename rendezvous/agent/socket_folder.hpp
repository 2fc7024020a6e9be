// The private folder of a node agent's Unix socket: made by mkdtemp (0700,
// this user only) under TMPDIR (or /tmp), and held by a lock on a file in it
// for the agent's life. The kernel drops the lock when the agent's process
// ends, however it ends, so a later agent can tell a folder left by a killed
// cc-run from one in use, and removes it.
#pragma once

#include <string>

#include "common/status.hpp"

namespace cc::rv::agent {

class SocketFolder {
 public:
  // Removes this user's folders that no live agent holds, then makes a new
  // one and locks it. Errors: CC_ERR_SYSTEM naming the folder and the fix.
  static Status make(SocketFolder* out);
  SocketFolder() = default;
  SocketFolder(SocketFolder&& other) noexcept;
  SocketFolder& operator=(SocketFolder&& other) noexcept;
  SocketFolder(const SocketFolder&) = delete;
  SocketFolder& operator=(const SocketFolder&) = delete;
  ~SocketFolder();  // removes the folder, with what is left in it

  const std::string& path() const { return path_; }

  // Folders named like an agent's under `parent`, owned by this user, whose
  // lock no process holds: removed. Returns how many.
  static int remove_stale(const std::string& parent);

 private:
  void release();
  std::string path_;
  int lock_fd_ = -1;
};

}  // namespace cc::rv::agent
