// Worker processes of a benchmark, each holding a share of its simulated
// nodes, driven by the parent over pipes in lines of text: the parent writes
// one command line to every worker, then reads one answer line from each
// ("ok ..." or "fail <why>"). Each process has its own open-file limit, so a
// simulation of many nodes' connections is not bounded by one process's.
// Fork before the parent starts any thread: a worker is a copy of it.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace cc::test {

// One command line a worker read and the answer it writes back.
class WorkerChannel {
 public:
  WorkerChannel(int commands, int answers) : in_(::fdopen(commands, "r")), out_(answers) {}
  // The next command line without its newline; false when the parent closed
  // the pipe (it is gone).
  bool next(std::string* line) {
    char buf[512];
    if (in_ == nullptr || std::fgets(buf, sizeof buf, in_) == nullptr) return false;
    *line = buf;
    if (!line->empty() && line->back() == '\n') line->pop_back();
    return true;
  }
  void answer(const std::string& words) {
    const std::string line = words + "\n";
    for (size_t done = 0; done < line.size();) {
      const ssize_t n = ::write(out_, line.data() + done, line.size() - done);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

 private:
  FILE* in_;
  int out_;
};

struct Worker {
  pid_t pid = -1;
  int commands = -1;        // the parent writes here
  FILE* answers = nullptr;  // and reads here
};

// Forks `count` workers; worker i runs body(i, channel) and exits with what it
// returns (by _exit: the parent's objects are not destroyed twice). A worker
// is killed when the parent dies. False (with why) when a fork failed.
inline bool fork_workers(int count, const std::function<int(int, WorkerChannel&)>& body,
                         std::vector<Worker>* out, std::string* why) {
  std::fflush(stdout);
  std::fflush(stderr);
  for (int i = 0; i < count; ++i) {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) {
      *why = std::string("pipe: ") + std::strerror(errno);
      return false;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      *why = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (const Worker& w : *out) {  // the pipes of the workers before
        ::close(w.commands);
        std::fclose(w.answers);
      }
      ::close(down[1]);
      ::close(up[0]);
      WorkerChannel channel(down[0], up[1]);
      const int status = body(i, channel);
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(status);
    }
    ::close(down[0]);
    ::close(up[1]);
    out->push_back({pid, down[1], ::fdopen(up[0], "r")});
  }
  return true;
}

// Writes command(i) to every worker i, then reads each one's answer line into
// (*answers)[i]. False with why when a worker is gone or answered "fail ...".
inline bool ask_workers(const std::vector<Worker>& workers,
                        const std::function<std::string(size_t)>& command,
                        std::vector<std::string>* answers, std::string* why) {
  for (size_t i = 0; i < workers.size(); ++i) {
    const std::string line = command(i) + "\n";
    if (::write(workers[i].commands, line.data(), line.size()) !=
        static_cast<ssize_t>(line.size())) {
      *why = "worker " + std::to_string(i) + " is gone";
      return false;
    }
  }
  answers->assign(workers.size(), {});
  bool ok = true;
  for (size_t i = 0; i < workers.size(); ++i) {
    char buf[1024];
    if (std::fgets(buf, sizeof buf, workers[i].answers) == nullptr) {
      if (ok) *why = "worker " + std::to_string(i) + " is gone";
      ok = false;
      continue;
    }
    std::string& a = (*answers)[i];
    a = buf;
    if (!a.empty() && a.back() == '\n') a.pop_back();
    if (a.rfind("ok", 0) != 0) {
      if (ok) *why = "worker " + std::to_string(i) + ": " + a;
      ok = false;
    }
  }
  return ok;
}

// Closes the workers' command pipes (each then ends) and waits for them; true
// when every one exited with 0.
inline bool end_workers(std::vector<Worker>* workers) {
  bool ok = true;
  for (Worker& w : *workers) ::close(w.commands);
  for (Worker& w : *workers) {
    int status = 0;
    if (::waitpid(w.pid, &status, 0) != w.pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      ok = false;
    std::fclose(w.answers);
  }
  workers->clear();
  return ok;
}

}  // namespace cc::test
