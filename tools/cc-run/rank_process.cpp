#include "tools/cc-run/rank_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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

// posix_spawn's attributes and file actions, destroyed with the object.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

int make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno;
  // cc-run reads without blocking; the rank writes as usual.
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return 0;
}

}  // namespace

int start_rank(const std::vector<std::string>& command, const std::vector<std::string>& env,
               bool inherit_stdin, StartedRank* out) {
  int out_pipe[2], err_pipe[2];
  if (const int e = make_pipe(out_pipe); e != 0) return e;
  if (const int e = make_pipe(err_pipe); e != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return e;
  }
  SpawnSetup s;
  // The rank's own process group, and the signals cc-run takes left at
  // their defaults.
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  sigemptyset(&none);
  posix_spawnattr_setpgroup(&s.attr, 0);
  posix_spawnattr_setsigdefault(&s.attr, &defaults);
  posix_spawnattr_setsigmask(&s.attr, &none);
  posix_spawnattr_setflags(&s.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  if (!inherit_stdin) posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&s.actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&s.actions, err_pipe[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&s.actions, 3);

  std::vector<char*> argv, envp;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &s.actions, &s.attr, argv.data(), envp.data());
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return rc;
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
