// The tests' one way to start a program: a child process with its standard
// streams piped to the test, sent to files or left as they are, extra
// environment variables, and, where asked, death with the test. Reads lines
// or everything with deadlines, signals, waits with a bound. Killed and
// reaped when destroyed. What cannot start throws std::runtime_error with
// the reason (Catch2 counts it as a failure), exec's own error included.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cc::test {

struct ChildOptions {
  std::vector<std::string> args;  // args[0] is the program's path
  std::vector<std::string> env;   // NAME=value, on top of this process's environment
  bool pipe_stdin = false;        // for say()
  bool pipe_stdout = false;       // for line() and collect()
  bool pipe_stderr = false;       // for collect()
  std::string stdout_file;        // else stdout goes to this file
  std::string stderr_file;        // else stderr goes to this file ("" and stderr_to_stdout:
  bool stderr_to_stdout = false;  // where stdout goes)
  bool append = false;            // to the files, instead of truncating them
  bool stdin_null = false;        // /dev/null, where stdin is not piped
  bool die_with_parent = false;   // SIGKILL when the thread that started it ends
};

class ChildProcess {
 public:
  explicit ChildProcess(ChildOptions options) { start(std::move(options)); }
  // A member program: its stdin and stdout piped to the test.
  explicit ChildProcess(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
    ChildOptions o;
    o.args = std::move(args);
    o.env = env;
    o.pipe_stdin = true;
    o.pipe_stdout = true;
    start(std::move(o));
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait_status(0);
    }
    for (int fd : {to_, from_, from_err_})
      if (fd >= 0) ::close(fd);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // -1 once reaped.
  pid_t pid() const { return pid_; }

  // The next line of its stdout, or nullopt at the deadline or the end of the stream.
  std::optional<std::string> line(std::chrono::milliseconds timeout) {
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
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char b[4096];
      const ssize_t n = ::read(from_, b, sizeof b);
      if (n <= 0) return std::nullopt;
      buf_.append(b, static_cast<size_t>(n));
    }
  }

  // Reads its stdout and stderr pipes into *out and *err until both end, or
  // until `keep_going(time since the start)`, asked between reads, says stop.
  void collect(std::string* out, std::string* err,
               const std::function<bool(std::chrono::milliseconds)>& keep_going) {
    std::vector<pollfd> fds{{from_, POLLIN, 0}, {from_err_, POLLIN, 0}};
    std::string* sinks[] = {out, err};
    out->append(buf_);
    buf_.clear();
    for (;;) {
      int open = 0;
      for (const pollfd& f : fds) open += f.fd >= 0 ? 1 : 0;
      if (open == 0 || !keep_going(since_start())) return;
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        char b[4096];
        const ssize_t n = ::read(fds[i].fd, b, sizeof b);
        if (n > 0)
          sinks[i]->append(b, static_cast<size_t>(n));
        else
          fds[i].fd = -1;  // closed in the destructor
      }
    }
  }

  // A line to its stdin.
  void say(const std::string& s) {
    const std::string l = s + "\n";
    if (::write(to_, l.data(), l.size()) != static_cast<ssize_t>(l.size()))
      throw std::runtime_error("cannot write to " + name_ + ": " + std::strerror(errno));
  }

  void signal(int sig) {
    if (pid_ <= 0 || ::kill(pid_, sig) != 0)
      throw std::runtime_error("cannot signal " + name_ + ": " + std::strerror(errno));
  }

  // Waits for it to end (after a signal, or on its own); the destructor then
  // leaves it alone. Returns waitpid's status.
  int reap() {
    const int status = wait_status(0);
    pid_ = -1;
    return status;
  }

  // Its waitpid status once it ended within `timeout` (then reaped), else nullopt.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return status;
      }
      if (r < 0 && errno != EINTR) return std::nullopt;
      if (Clock::now() >= until) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // An exit status, or 128 + the signal that ended it.
  static int exit_code(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  using Clock = std::chrono::steady_clock;

  std::chrono::milliseconds since_start() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_);
  }

  int wait_status(int flags) {
    int status = 0;
    while (::waitpid(pid_, &status, flags) < 0 && errno == EINTR) {
    }
    return status;
  }

  static void make_pipe(int fds[2]) {
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }

  // In the child, between fork and exec: only async-signal-safe calls.
  [[noreturn]] static void run_child(const ChildOptions& o, char* const* argv, pid_t parent,
                                     const int in[2], const int out[2], const int err[2],
                                     int report) {
    if (o.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    const int flags = O_WRONLY | O_CREAT | (o.append ? O_APPEND : O_TRUNC);
    if (o.pipe_stdin)
      ::dup2(in[0], 0);
    else if (o.stdin_null) {
      const int fd = ::open("/dev/null", O_RDONLY);
      if (fd >= 0) ::dup2(fd, 0);
    }
    if (o.pipe_stdout)
      ::dup2(out[1], 1);
    else if (!o.stdout_file.empty()) {
      const int fd = ::open(o.stdout_file.c_str(), flags, 0600);
      if (fd >= 0) ::dup2(fd, 1);
    }
    if (o.pipe_stderr)
      ::dup2(err[1], 2);
    else if (!o.stderr_file.empty()) {
      const int fd = ::open(o.stderr_file.c_str(), flags, 0600);
      if (fd >= 0) ::dup2(fd, 2);
    } else if (o.stderr_to_stdout) {
      ::dup2(1, 2);
    }
    for (const std::string& e : o.env) ::putenv(const_cast<char*>(e.c_str()));
    ::execv(argv[0], argv);
    const int e = errno;
    (void)!::write(report, &e, sizeof e);
    ::_exit(127);
  }

  void start(ChildOptions o) {
    if (o.args.empty()) throw std::runtime_error("no program to start");
    name_ = o.args[0];
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
    if (o.pipe_stdin) make_pipe(in);
    if (o.pipe_stdout) make_pipe(out);
    if (o.pipe_stderr) make_pipe(err);
    make_pipe(report);  // exec's errno, or nothing once exec closed it
    std::vector<char*> argv;
    for (auto& a : o.args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    started_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) run_child(o, argv.data(), parent, in, out, err, report[1]);
    const int fork_errno = errno;
    for (int fd : {in[0], out[1], err[1], report[1]})
      if (fd >= 0) ::close(fd);
    to_ = in[1];
    from_ = out[0];
    from_err_ = err[0];
    if (pid_ < 0) {
      ::close(report[0]);
      throw std::runtime_error("cannot start " + name_ + ": fork: " + std::strerror(fork_errno));
    }
    int exec_errno = 0;
    ssize_t n = 0;
    while ((n = ::read(report[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
    }
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof exec_errno)) {
      reap();
      throw std::runtime_error("cannot start " + name_ + ": " + std::strerror(exec_errno));
    }
  }

  std::string name_;
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  int from_err_ = -1;
  std::string buf_;
  Clock::time_point started_;
};

}  // namespace cc::test
