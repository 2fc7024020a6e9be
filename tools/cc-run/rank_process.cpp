#include "tools/cc-run/rank_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>

#include "lib/launch/host_name.hpp"
#include "lib/launch/share_gpu.hpp"

extern char** environ;

namespace cc::tools::run {

namespace {

// --share-gpu: the rank is a host of its own (local rank 0 of 1) whose
// NCCL talks over sockets, on the node's one GPU; libcc keeps cc's kernels
// off (lib/launch/share_gpu.hpp). Set here, not left to libcc, so that a
// program's own NCCL (torch's "nccl" backend) sees the same hosts.
void add_shared_gpu(int rank, std::map<std::string, std::string>* set) {
  auto& s = *set;
  s["CC_SHARE_GPU"] = "1";
  s["NCCL_HOSTID"] =
      cc::launch::shared_gpu_host_id(cc::launch::host_name(), "rank" + std::to_string(rank));
  s["NCCL_P2P_DISABLE"] = "1";
  s["NCCL_SHM_DISABLE"] = "1";
  s["CC_LOCAL_RANK"] = "0";
  s["LOCAL_RANK"] = "0";
  s["LOCAL_WORLD_SIZE"] = "1";
  if (std::getenv("CC_DEVICE") == nullptr) s["CC_DEVICE"] = "0";
}

}  // namespace

std::vector<std::string> rank_environment(const Options& o, int local, const std::string& addr,
                                          int port, const std::string& job_id,
                                          const std::string& agent_socket, int restart) {
  const int world = o.nnodes * o.nproc;
  const int rank = o.node_rank * o.nproc + local;
  std::map<std::string, std::string> set = {
      {"CC_RANK", std::to_string(rank)},
      {"RANK", std::to_string(rank)},
      {"CC_WORLD_SIZE", std::to_string(world)},
      {"WORLD_SIZE", std::to_string(world)},
      {"CC_LOCAL_RANK", std::to_string(local)},
      {"LOCAL_RANK", std::to_string(local)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"MASTER_ADDR", addr},
      {"CC_JOB_ID", job_id},
      {"CC_RENDEZVOUS", "external"},
  };
  // An address that carries its port (tcp://, etcd://) needs no MASTER_PORT.
  if (o.rendezvous.needs_port()) set["MASTER_PORT"] = std::to_string(port);
  if (o.timeout_ms > 0) set["CC_TIMEOUT_MS"] = std::to_string(o.timeout_ms);
  if (restart > 0) set["CC_RESTART_COUNT"] = std::to_string(restart);
  if (!agent_socket.empty()) set["CC_AGENT_SOCKET"] = agent_socket;
  if (o.share_gpu) add_shared_gpu(rank, &set);
  // Ours win over inherited ones, including CC_MASTER_* which would shadow
  // them.
  const char* shadowing[] = {"CC_MASTER_ADDR", "CC_MASTER_PORT", "CC_RESTART_COUNT", "MASTER_PORT",
                             "CC_AGENT_SOCKET"};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (set.count(name) != 0) continue;
    if (std::find(std::begin(shadowing), std::end(shadowing), name) != std::end(shadowing))
      continue;
    env.push_back(entry);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

namespace {

int make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno;
  // cc-run reads without blocking; the rank writes as usual.
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return 0;
}

// The file `name` runs as, searched in PATH as execvp would, before the
// fork: the child may only make async-signal-safe calls. 0, or ENOENT,
// EACCES as execvp would fail.
int find_program(const std::string& name, std::string* path) {
  if (name.find('/') != std::string::npos) {
    *path = name;
    return 0;
  }
  const char* env = std::getenv("PATH");
  const std::string dirs = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  int error = ENOENT;
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > at ? dirs.substr(at, end - at) : ".";
    const std::string candidate = dir + "/" + name;
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0) {
        *path = candidate;
        return 0;
      }
      error = EACCES;
    }
    at = end + 1;
  }
  return error;
}

// In the child, between fork and exec: async-signal-safe calls only. Writes
// the errno of what failed to `report` and exits.
[[noreturn]] void report_errno(int report) {
  const int e = errno;
  [[maybe_unused]] const ssize_t n = ::write(report, &e, sizeof e);
  ::_exit(127);
}

[[noreturn]] void exec_rank(const char* path, char* const argv[], char* const envp[],
                            pid_t parent, bool inherit_stdin, int out, int err, int report) {
  auto fail = [report]() { report_errno(report); };
  // The rank's own process group, so a signal reaches the whole rank (a
  // shell script and its children) and never cc-run itself.
  if (::setpgid(0, 0) != 0) fail();
  // The rank dies with cc-run, even with a cc-run killed by SIGKILL. (The
  // signal follows the thread that forked: cc-run starts ranks on its main
  // thread only.) A cc-run gone already is caught by the parent check.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail();
  if (::getppid() != parent) ::_exit(128 + SIGKILL);
  // The signals cc-run takes, back at their defaults; none blocked.
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!inherit_stdin) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null < 0 || ::dup2(null, 0) < 0) fail();
    if (null != 0) ::close(null);
  }
  if (::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) fail();
  // Nothing else of cc-run's is inherited; `report` closes itself at exec.
  if (report > 3) ::close_range(3, static_cast<unsigned>(report) - 1, 0);
  ::close_range(static_cast<unsigned>(report) + 1, ~0U, 0);
  ::execve(path, argv, envp);
  report_errno(report);
}

}  // namespace

int start_rank(const std::vector<std::string>& command, const std::vector<std::string>& env,
               bool inherit_stdin, StartedRank* out) {
  std::string path;
  if (const int e = find_program(command[0], &path); e != 0) return e;
  int out_pipe[2], err_pipe[2], report[2];
  if (const int e = make_pipe(out_pipe); e != 0) return e;
  if (const int e = make_pipe(err_pipe); e != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return e;
  }
  if (::pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return e;
  }
  std::vector<char*> argv, envp;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0)
    exec_rank(path.c_str(), argv.data(), envp.data(), parent, inherit_stdin, out_pipe[1],
              err_pipe[1], report[1]);
  const int fork_error = pid < 0 ? errno : 0;
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(report[1]);
  // The exec's outcome: end of file once it ran, else the child's errno.
  int child_error = fork_error;
  if (pid > 0) {
    int e = 0;
    ssize_t n;
    do n = ::read(report[0], &e, sizeof e);
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof e)) {
      child_error = e;
      ::waitpid(pid, nullptr, 0);
    }
  }
  ::close(report[0]);
  if (child_error != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return child_error;
  }
  out->pid = pid;
  out->out_fd = out_pipe[0];
  out->err_fd = err_pipe[0];
  return 0;
}

bool program_not_found(int error) { return error == ENOENT || error == EACCES || error == ENOTDIR; }

void signal_groups(const std::vector<pid_t>& pids, int sig) {
  for (pid_t pid : pids)
    if (pid > 0) ::kill(-pid, sig);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe_status(int status) {
  std::string s = "status " + std::to_string(exit_code_of(status));
  if (WIFSIGNALED(status)) {
    s += " (killed by signal " + std::to_string(WTERMSIG(status)) + ": " +
         ::strsignal(WTERMSIG(status)) + ")";
  }
  return s;
}

}  // namespace cc::tools::run
