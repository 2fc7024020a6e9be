// cc-run: starts N local ranks of a program with the launch environment cc
// reads, hosts the job's rendezvous server on node 0, prefixes every output
// line with its rank, forwards SIGINT/SIGTERM, and when one rank fails stops
// the others and exits with that rank's status (with --max-restarts: starts
// the failed rank again and lets the others run on).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "lib/launch/config.hpp"
#include "lib/launch/env.hpp"
#include "lib/launch/etcd.hpp"
#include "lib/launch/host_name.hpp"
#include "lib/launch/share_gpu.hpp"
#include "rendezvous/server.hpp"
#include "tools/cli/cli.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kUsageError = 2;
constexpr size_t kMaxLine = 64 * 1024;  // a longer line is cut, not buffered forever
constexpr milliseconds kDrainAfterExit{1000};

constexpr const char* kAbout =
    "Starts N ranks of PROGRAM on this node with the environment cc reads (CC_RANK/RANK,\n"
    "CC_WORLD_SIZE/WORLD_SIZE, CC_LOCAL_RANK/LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
    "MASTER_PORT, CC_JOB_ID, CC_RENDEZVOUS=external). Node 0 hosts the rendezvous server\n"
    "(on 127.0.0.1 for one node without --master-addr, else on 0.0.0.0, or :: for an IPv6\n"
    "--master-addr), unless --master-addr names an etcd cluster.\n"
    "Every output line is prefixed with \"[rank R] \". When a rank fails, the others are\n"
    "stopped and cc-run exits with the failed rank's status (128+signal for a signal),\n"
    "unless --max-restarts lets the job survive it.";

constexpr const char* kFooter =
    "The server takes its token from CC_RENDEZVOUS_TOKEN or CC_RENDEZVOUS_TOKEN_FILE.";

struct Options {
  int nproc = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;
  int master_port = 0;
  std::string job_id;
  int grace_ms = 2000;
  int timeout_ms = 0;      // 0 = leave CC_TIMEOUT_MS as it is
  int max_restarts = -1;   // -1: a failed rank stops the job
  bool share_gpu = false;  // every rank on one GPU, each its own host to NCCL
  std::vector<std::string> command;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "cc-run: %s\n(cc-run --help shows the usage)\n", message.c_str());
  std::exit(kUsageError);
}

// A whole number in [min, max]; bad values are rejected in settings::parse_int's
// words, naming the option `flag`.
int number(const std::string& flag, const std::string& text, long long min, long long max) {
  long long v = 0;
  if (cc::Status s = cc::settings::parse_int(flag.c_str(), text.c_str(), min, max, &v); !s.ok())
    cc::cli::reject(s.message);
  return static_cast<int>(v);
}

// An option taking a whole number from min to max into *target, named
// `value_name` in --help.
CLI::Option* add_number(CLI::App& app, const std::string& flag, long long min, long long max,
                        int* target, const std::string& help, const std::string& value_name) {
  return app
      .add_option_function<std::string>(
          flag, [=](const std::string& v) { *target = number(flag, v, min, max); }, help)
      ->option_text(value_name);
}

// An option taking a value that must not be empty ("FLAG is empty").
void add_text(CLI::App& app, const std::string& flag, std::string* target, const std::string& help,
              const std::string& value_name) {
  app.add_option_function<std::string>(
         flag,
         [=](const std::string& v) {
           if (v.empty()) cc::cli::reject(flag + " is empty");
           *target = v;
         },
         help)
      ->option_text(value_name);
}

Options parse_args(int argc, char** argv) {
  Options o;
  cc::cli::CommandLine command_line("usage: cc-run -n N [options] -- PROGRAM [ARGS...]", 25);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  app.footer(kFooter);
  // The first argument no option takes is the program: it and everything
  // after it (or after "--") are the program's.
  app.prefix_command();
  auto* nproc = app.add_option_function<std::string>(
                       "-n,--nproc",
                       [&](const std::string& v) {
                         o.nproc = number(command_line.spelled("-n"), v, 1, 4096);
                       },
                       "ranks on this node (required)")
                    ->option_text("N");
  add_number(app, "--nnodes", 1, 100000, &o.nnodes,
             "nodes in the job (default 1); world size = K * N", "K");
  auto* node_rank =
      add_number(app, "--node-rank", 0, 100000, &o.node_rank,
                 "this node's index, 0..K-1 (default 0); node 0 hosts the server", "I");
  add_text(app, "--master-addr", &o.master_addr,
           "the rendezvous address the ranks use (default 127.0.0.1;\n"
           "required on nodes other than 0); etcd://host:port[,host:port...]\n"
           "(or etcds://) puts the rendezvous in that etcd cluster: no node\n"
           "hosts a server, so any node may fail, and --master-port is unused",
           "A");
  auto* master_port = add_number(app, "--master-port", 0, 65535, &o.master_port,
                                 "port of the rendezvous (node 0: 0 = any free port, the default;\n"
                                 "required on nodes other than 0)",
                                 "P");
  add_text(app, "--job-id", &o.job_id,
           "job id (default: CC_JOB_ID, else a fresh one for one node,\n"
           "else \"default\")",
           "J");
  add_number(app, "--grace-ms", 0, INT_MAX, &o.grace_ms,
             "after a rank fails, wait MS before SIGTERM, and MS more before\n"
             "SIGKILL (default 2000)",
             "MS");
  add_number(app, "--timeout-ms", 1, INT_MAX, &o.timeout_ms,
             "exported to the ranks as CC_TIMEOUT_MS (init and store deadline)", "MS");
  add_number(app, "--max-restarts", 0, INT_MAX, &o.max_restarts,
             "the job survives failed ranks: a rank that fails is started\n"
             "again (same environment plus CC_RESTART_COUNT=n, the n-th\n"
             "restart of the job), up to K restarts in the job; the other\n"
             "ranks are never stopped for it (they recover with\n"
             "cc_comm_regrow or cc_comm_shrink). The exit status is that of\n"
             "the first rank that failed and was not started again",
             "K");
  app.add_flag("--share-gpu", o.share_gpu,
               "every rank of this node on one GPU (CC_DEVICE, default 0), each\n"
               "its own host to NCCL (NCCL_HOSTID), NCCL over sockets, cc's\n"
               "kernels off: for testing with fewer GPUs than ranks; timings\n"
               "mean nothing (sets CC_SHARE_GPU=1, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1)");
  command_line.add_help();

  if (const auto exit_status = command_line.parse_or_exit(argc, argv, "option", usage_error))
    std::exit(*exit_status);
  o.command = app.remaining();
  if (!o.command.empty() && o.command.front() == "--") {
    o.command.erase(o.command.begin());
  } else if (!o.command.empty() && o.command.front().rfind("-", 0) == 0) {
    usage_error("unknown option '" + o.command.front() + "'");
  }

  if (nproc->count() == 0) usage_error("-n N (ranks on this node) is required");
  if (o.command.empty()) usage_error("no program given: cc-run -n N -- PROGRAM [ARGS...]");
  if (o.node_rank >= o.nnodes) {
    usage_error("--node-rank " + std::to_string(o.node_rank) + " is not below --nnodes " +
                std::to_string(o.nnodes));
  }
  if (o.nnodes > 1 && node_rank->count() == 0)
    usage_error("--nnodes " + std::to_string(o.nnodes) + " needs --node-rank");
  if (static_cast<long long>(o.nnodes) * o.nproc > INT_MAX)
    usage_error("the world size is too large");
  if (o.node_rank != 0) {
    if (o.master_addr.empty())
      usage_error("node " + std::to_string(o.node_rank) +
                  " needs --master-addr (node 0's address)");
    if ((master_port->count() == 0 || o.master_port == 0) &&
        !cc::launch::is_etcd_address(o.master_addr)) {
      usage_error("node " + std::to_string(o.node_rank) +
                  " needs --master-port (the port node 0's cc-run serves)");
    }
  }
  return o;
}

// The program's path: as given when it has a '/', else the first executable
// match in PATH.
std::optional<std::string> find_program(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (executable(name)) return name;
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    // An empty PATH entry means the current directory.
    const std::string dir = end > start ? dirs.substr(start, end - start) : std::string(".");
    if (const std::string candidate = dir + "/" + name; executable(candidate)) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

std::string fresh_job_id() {
  char host[64] = {};
  ::gethostname(host, sizeof(host) - 1);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::string("cc-run-") + host + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now).count());
}

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own output is gone: nothing better to do
    done += static_cast<size_t>(n);
  }
}

// ---- signals: a self-pipe the main loop polls ---------------------------

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

void install_signal_handlers() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::perror("cc-run: pipe2");
    std::exit(1);
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  sigaction(SIGCHLD, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

// Two pipes per rank, plus the server's connections: raise the soft limit
// toward the hard one when the default would run out.
void raise_fd_limit(rlim_t needed) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= needed) return;
  lim.rlim_cur = std::min(needed + 1024, lim.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

// ---- ranks ------------------------------------------------------------------

struct Stream {
  int fd = -1;     // read end; -1 once closed
  int out_fd = 1;  // where its lines go
  std::string partial;
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // waitpid status once exited
  Stream out, err;
};

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

// restart: 0 for a rank's first start, else the job's restart count.
std::vector<std::string> rank_environment(const Options& o, int local, const std::string& addr,
                                          int port, const std::string& job_id, int restart = 0) {
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
  // An etcd address carries its ports.
  if (!cc::launch::is_etcd_address(addr)) set["MASTER_PORT"] = std::to_string(port);
  if (o.timeout_ms > 0) set["CC_TIMEOUT_MS"] = std::to_string(o.timeout_ms);
  if (restart > 0) set["CC_RESTART_COUNT"] = std::to_string(restart);
  if (o.share_gpu) add_shared_gpu(rank, &set);
  // Ours win over inherited ones, including CC_MASTER_* which would shadow them.
  const char* shadowing[] = {"CC_MASTER_ADDR", "CC_MASTER_PORT", "CC_RESTART_COUNT", "MASTER_PORT"};
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

// Starts one rank in its own process group, so a signal reaches the whole
// rank (a shell script and its children) and never cc-run itself.
bool spawn(Rank& r, const std::string& path, const std::vector<std::string>& args,
           const std::vector<std::string>& env, bool inherit_stdin) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return false;
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return false;
  }
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::signal(SIGCHLD, SIG_DFL);
    if (!inherit_stdin) {
      const int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) ::dup2(null, 0);
    }
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close_range(3, ~0U, 0);
    ::execve(path.c_str(), argv.data(), envp.data());
    const char msg[] = "cc-run: exec failed\n";
    [[maybe_unused]] ssize_t n = ::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so no signal can race the child's own call
  ::close(out[1]);
  ::close(err[1]);
  r.pid = pid;
  r.running = true;
  r.out.fd = out[0];
  r.out.out_fd = 1;
  r.err.fd = err[0];
  r.err.out_fd = 2;
  return true;
}

void emit_lines(const Rank& r, Stream& s, bool flush_partial) {
  const std::string prefix = "[rank " + std::to_string(r.rank) + "] ";
  size_t start = 0;
  for (;;) {
    const size_t nl = s.partial.find('\n', start);
    if (nl == std::string::npos) break;
    write_all(s.out_fd, prefix + s.partial.substr(start, nl - start + 1));
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (!s.partial.empty() && (flush_partial || s.partial.size() >= kMaxLine)) {
    write_all(s.out_fd, prefix + s.partial + "\n");
    s.partial.clear();
  }
}

void read_stream(const Rank& r, Stream& s) {
  char buf[65536];
  const ssize_t n = ::read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    emit_lines(r, s, true);
    ::close(s.fd);
    s.fd = -1;
    return;
  }
  s.partial.append(buf, static_cast<size_t>(n));
  emit_lines(r, s, false);
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

void signal_all(std::vector<Rank>& ranks, int sig) {
  for (const auto& r : ranks) {
    if (r.pid > 0) ::kill(-r.pid, sig);  // the rank's process group
  }
}

// Starts a rank again after it failed; the int is the job's restart count.
using Respawn = std::function<bool(Rank&, int)>;

class Launcher {
 public:
  Launcher(Options o, std::vector<Rank> ranks, Respawn respawn)
      : o_(std::move(o)), ranks_(std::move(ranks)), respawn_(std::move(respawn)) {}

  int run() {
    const milliseconds grace(o_.grace_ms);
    std::optional<Clock::time_point> term_at, kill_at, drain_until;
    for (;;) {
      const auto now = Clock::now();
      if (term_at && now >= *term_at) {
        signal_all(ranks_, SIGTERM);
        term_at.reset();
        kill_at = now + grace;
      }
      if (kill_at && now >= *kill_at) {
        signal_all(ranks_, SIGKILL);
        kill_at.reset();
      }
      const bool any_running =
          std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
      if (!any_running && !drain_until) drain_until = now + kDrainAfterExit;
      if (drain_until && now >= *drain_until) break;  // a rank's children still hold its output

      std::vector<pollfd> fds{{g_signal_pipe[0], POLLIN, 0}};
      std::vector<std::pair<Rank*, Stream*>> owners{{nullptr, nullptr}};
      for (auto& r : ranks_) {
        for (Stream* s : {&r.out, &r.err}) {
          if (s->fd >= 0) {
            fds.push_back({s->fd, POLLIN, 0});
            owners.emplace_back(&r, s);
          }
        }
      }
      if (!any_running && fds.size() == 1) break;

      int wait_ms = 200;
      for (const auto& t : {term_at, kill_at, drain_until}) {
        if (t) {
          wait_ms = std::min<int>(
              wait_ms, static_cast<int>(std::max<long long>(
                           0, std::chrono::duration_cast<milliseconds>(*t - now).count() + 1)));
        }
      }
      const int rc = ::poll(fds.data(), fds.size(), wait_ms);
      if (rc < 0 && errno != EINTR) {
        std::perror("cc-run: poll");
        signal_all(ranks_, SIGKILL);
        return 1;
      }
      for (size_t i = 1; rc > 0 && i < fds.size(); ++i) {
        if (fds[i].revents != 0) read_stream(*owners[i].first, *owners[i].second);
      }
      if (rc > 0 && fds[0].revents != 0) handle_signals(grace, &kill_at);
      reap(grace, &term_at);
    }
    for (auto& r : ranks_) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->fd >= 0) {
          emit_lines(r, *s, true);
          ::close(s->fd);
          s->fd = -1;
        }
      }
    }
    signal_all(ranks_, SIGKILL);  // whatever a rank left behind in its group
    if (stop_signal_ != 0) return 128 + stop_signal_;
    if (failed_ >= 0) return exit_code_of(ranks_[static_cast<size_t>(failed_)].status);
    return 0;
  }

 private:
  void handle_signals(milliseconds grace, std::optional<Clock::time_point>* kill_at) {
    unsigned char sigs[64];
    ssize_t n = 0;
    while ((n = ::read(g_signal_pipe[0], sigs, sizeof(sigs))) > 0) {
      for (ssize_t k = 0; k < n; ++k) {
        const int sig = sigs[k];
        if (sig == SIGCHLD) continue;  // reap() runs after every wake-up
        if (stop_signal_ == 0) {
          std::fprintf(stderr, "cc-run: got %s; passing it to the ranks\n", ::strsignal(sig));
          stop_signal_ = sig;
          *kill_at = Clock::now() + 2 * grace;
        } else {
          std::fprintf(stderr, "cc-run: got %s again; killing the ranks\n", ::strsignal(sig));
          *kill_at = Clock::now();
        }
        signal_all(ranks_, sig == SIGHUP ? SIGTERM : sig);
      }
    }
  }

  void reap(milliseconds grace, std::optional<Clock::time_point>* term_at) {
    for (auto& r : ranks_) {
      if (!r.running) continue;
      int status = 0;
      const pid_t p = ::waitpid(r.pid, &status, WNOHANG);
      if (p != r.pid) continue;
      r.running = false;
      r.status = status;
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && o_.max_restarts >= 0 && stop_signal_ == 0) {
        survive(r, status);
        continue;
      }
      if (!failed || failed_ >= 0 || stop_signal_ != 0) continue;
      failed_ = static_cast<int>(&r - ranks_.data());
      const bool others =
          std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& x) { return x.running; });
      // Flush what the rank said before its death is announced.
      for (Stream* s : {&r.out, &r.err}) {
        while (s->fd >= 0) {
          pollfd pf{s->fd, POLLIN, 0};
          if (::poll(&pf, 1, 0) <= 0) break;
          read_stream(r, *s);
        }
      }
      std::fprintf(stderr, "cc-run: rank %d (pid %d) exited with %s%s\n", r.rank,
                   static_cast<int>(r.pid), describe_status(status).c_str(),
                   others ? "; stopping the other ranks" : "");
      std::fflush(stderr);
      if (others) *term_at = Clock::now() + grace;
    }
  }

  // --max-restarts: a failed rank is started again while restarts are left;
  // the others run on either way.
  void survive(Rank& r, int status) {
    for (Stream* s : {&r.out, &r.err}) {
      while (s->fd >= 0) {
        pollfd pf{s->fd, POLLIN, 0};
        if (::poll(&pf, 1, 0) <= 0) break;
        read_stream(r, *s);
      }
      if (s->fd >= 0) {  // what its children still hold is not this rank's any more
        emit_lines(r, *s, true);
        ::close(s->fd);
        s->fd = -1;
      }
    }
    ::kill(-r.pid, SIGKILL);  // what the rank left behind in its group
    const pid_t old = r.pid;
    if (restarts_ < o_.max_restarts) {
      ++restarts_;
      std::fprintf(
          stderr, "cc-run: rank %d (pid %d) exited with %s; starting it again (restart %d of %d)\n",
          r.rank, static_cast<int>(old), describe_status(status).c_str(), restarts_,
          o_.max_restarts);
      std::fflush(stderr);
      if (respawn_(r, restarts_)) return;
      std::fprintf(stderr, "cc-run: cannot start rank %d again: %s\n", r.rank,
                   std::strerror(errno));
    } else {
      std::fprintf(stderr,
                   "cc-run: rank %d (pid %d) exited with %s; no restart left (%d used); the other "
                   "ranks run on\n",
                   r.rank, static_cast<int>(old), describe_status(status).c_str(), restarts_);
    }
    std::fflush(stderr);
    if (failed_ < 0) failed_ = static_cast<int>(&r - ranks_.data());
  }

  Options o_;
  std::vector<Rank> ranks_;
  Respawn respawn_;
  int failed_ = -1;      // index of the first rank that failed (and was not started again)
  int stop_signal_ = 0;  // a signal cc-run was asked to stop with
  int restarts_ = 0;     // ranks started again so far (--max-restarts)
};

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);

  const auto path = find_program(o.command[0]);
  if (!path) {
    std::fprintf(stderr,
                 "cc-run: cannot find the program '%s': %s. Check the name, or give its path\n",
                 o.command[0].c_str(),
                 o.command[0].find('/') != std::string::npos ? "no such executable file"
                                                             : "it is not an executable in PATH");
    return 127;
  }

  cc::launch::ResolvedConfig cfg;
  if (cc::Status s = cc::launch::resolve_config(nullptr, cc::settings::process_env(), &cfg);
      !s.ok()) {
    std::fprintf(stderr, "cc-run: %s\n", s.message.c_str());
    return kUsageError;
  }
  std::string job_id = o.job_id;
  if (job_id.empty()) {
    const char* from_env = std::getenv("CC_JOB_ID");
    job_id = from_env != nullptr && *from_env != '\0' ? from_env
             : o.nnodes == 1                          ? fresh_job_id()
                                                      : "default";
  }

  if (o.share_gpu) {
    const char* device = std::getenv("CC_DEVICE");
    std::fprintf(stderr,
                 "cc-run: --share-gpu: the %d rank(s) of this node share GPU %s, each its own host "
                 "to NCCL; NCCL goes over sockets and cc's kernels are off, so timings say "
                 "nothing about a real machine\n",
                 o.nproc, device != nullptr ? device : "0");
  }
  install_signal_handlers();
  raise_fd_limit(static_cast<rlim_t>(o.nproc) * 2 + 256);

  std::unique_ptr<cc::rv::Server> server;
  int port = o.master_port;
  // On etcd the cluster is the rendezvous: no node hosts a server.
  if (o.node_rank == 0 && !cc::launch::is_etcd_address(o.master_addr)) {
    cc::rv::ServerOptions so;
    // One node without --master-addr: the ranks are all here, so the job's
    // keys need not be reachable from the network.
    so.bind_addr = o.nnodes == 1 && o.master_addr.empty()         ? "127.0.0.1"
                   : o.master_addr.find(':') != std::string::npos ? "::"  // an IPv6 address
                                                                  : "0.0.0.0";
    so.port = o.master_port;
    so.token = cfg.token;
    // The server lives as long as the launch: the jobs' keys stay that long
    // unless CC_JOB_TTL_MS asks for less.
    so.job_ttl = std::chrono::milliseconds(cfg.job_ttl_or(0));
    if (cc::Status s = cc::rv::Server::start(so, &server); !s.ok()) {
      std::fprintf(stderr, "cc-run: cannot start the rendezvous server: %s\n", s.message.c_str());
      return 1;
    }
    port = server->port();
  }
  const std::string addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;

  std::vector<Rank> ranks(static_cast<size_t>(o.nproc));
  const bool stdin_to_rank0 = ::isatty(0) == 0;
  for (int local = 0; local < o.nproc; ++local) {
    Rank& r = ranks[static_cast<size_t>(local)];
    r.rank = o.node_rank * o.nproc + local;
    if (!spawn(r, *path, o.command, rank_environment(o, local, addr, port, job_id),
               stdin_to_rank0 && local == 0)) {
      const int err = errno;
      std::fprintf(stderr, "cc-run: cannot start rank %d: %s%s; stopping the others\n", r.rank,
                   std::strerror(err),
                   err == EMFILE ? " (raise the open-file limit: ulimit -n)" : "");
      signal_all(ranks, SIGKILL);
      for (auto& x : ranks) {
        if (x.pid > 0) ::waitpid(x.pid, nullptr, 0);
      }
      return 1;
    }
  }

  const Respawn respawn = [&](Rank& r, int restart) {
    const int local = r.rank - o.node_rank * o.nproc;
    return spawn(r, *path, o.command, rank_environment(o, local, addr, port, job_id, restart),
                 false);
  };
  const int code = Launcher(o, std::move(ranks), respawn).run();
  if (server) {
    // Ranks on other nodes may still be members of the job.
    if (o.nnodes > 1) server->wait_job_idle(job_id, std::chrono::seconds(30));
    server->stop();
  }
  return code;
}
