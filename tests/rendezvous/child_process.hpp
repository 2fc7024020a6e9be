// A test's child process: a program started with a pipe to its stdin and
// one from its stdout (and extra environment variables), read line by line
// with a deadline. Killed and reaped when destroyed. Shared by the tests
// whose ranks are member programs (failure, recovery, etcd).
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace cc::test {

class ChildProcess {
 public:
  explicit ChildProcess(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
    int in[2], out[2];
    REQUIRE(pipe(in) == 0);
    REQUIRE(pipe(out) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(to_);
    close(from_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The next line, or nullopt at the deadline or the end of the stream.
  std::optional<std::string> line(std::chrono::milliseconds timeout) {
    using Clock = std::chrono::steady_clock;
    const auto until = Clock::now() + timeout;
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return std::nullopt;
      pollfd p{from_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char b[4096];
      const ssize_t n = read(from_, b, sizeof b);
      if (n <= 0) return std::nullopt;
      buf_.append(b, static_cast<size_t>(n));
    }
  }

  void say(const std::string& s) {
    const std::string l = s + "\n";
    REQUIRE(write(to_, l.data(), l.size()) == static_cast<ssize_t>(l.size()));
  }

  void signal(int sig) { REQUIRE(kill(pid_, sig) == 0); }

  // Waits for the process to end (after a signal, or on its own); the
  // destructor then leaves it alone. Returns waitpid's status.
  int reap() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  std::string buf_;
};

}  // namespace cc::test
