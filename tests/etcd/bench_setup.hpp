// What the etcd benchmarks (cc-etcd-rendezvous-bench, cc-etcd-store-bench,
// cc-etcd-agents-bench) share: their options (-n, -r, --members, --address),
// the words of a wrong argument, a high open-file limit, a process's CPU
// time, and the local cluster they start when no --address is given.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/etcd/etcd_cluster.hpp"
#include "tools/cli/cli.hpp"

namespace cc::test {

// CPU seconds used so far by a process (user + system), from /proc.
inline double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i)
    if (i == 14 || i == 15) ticks += std::atof(f.c_str());
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// What both take: how many ranks or clients, how many runs, and the cluster.
struct BenchArgs {
  int n = 1024;
  int runs = 3;
  int members = 3;      // of the cluster started here
  std::string address;  // a cluster to use instead
  // For the cluster started here: more flags for every member, and NAME=value
  // for their environment (an operator's tuning, measured: GOGC=400, say).
  std::vector<std::string> etcd_flags;
  std::vector<std::string> etcd_env;
};

// -n N (up to max_n; n_help says what they are), -r RUNS, --members M,
// --address ADDR, --etcd-flag=FLAG and --etcd-env NAME=VALUE.
inline void add_bench_options(CLI::App& app, BenchArgs* args, int max_n,
                              const std::string& n_help) {
  cc::cli::add_number(app, "-n", "N", 1, max_n, &args->n, n_help);
  cc::cli::add_number(app, "-r", "RUNS", 1, 1000, &args->runs,
                      "runs, each a fresh job (default 3)");
  cc::cli::add_number(app, "--members", "M", 1, 9, &args->members,
                      "members of the cluster started here (default 3)");
  cc::cli::add_value(app, "--address", "ADDR", "an etcd cluster to run against instead",
                     [args](const std::string& v) {
                       if (v.empty()) cc::cli::reject("--address is empty");
                       args->address = v;
                     });
  app.add_option("--etcd-flag", args->etcd_flags,
                 "one more flag for every member of the cluster started here, e.g. "
                 "--etcd-flag=--backend-batch-interval=10ms (repeatable)")
      ->option_text("FLAG");
  app.add_option("--etcd-env", args->etcd_env,
                 "NAME=VALUE in the environment of every member of the cluster started here, "
                 "e.g. GOGC=400 (repeatable)")
      ->option_text("NAME=VALUE")
      ->check([](const std::string& v) {
        return v.find('=') == std::string::npos ? std::string("not NAME=VALUE: ") + v
                                                : std::string();
      });
}

// Parses the command line (adding --help); a wrong argument prints
// "<program>: <words> (see --help)". The exit status where it must stop.
inline std::optional<int> parse_bench_arguments(cc::cli::CommandLine& command_line, int argc,
                                                char** argv, const char* program) {
  command_line.add_help();
  return command_line.parse_or_exit(argc, argv, "argument", [program](const std::string& words) {
    std::fprintf(stderr, "%s: %s (see --help)\n", program, words.c_str());
  });
}

// Every simulated rank or client holds its own connections: the open-file
// limit goes up to the hard one.
inline void raise_open_files() {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
}

// Starts a cluster of `members` on 127.0.0.1 with etcd's default timings
// (100 ms heartbeat, 1 s election), as a real cluster, and sets *address to it.
// The benchmark's threads would run on other machines than etcd: here this
// process then yields the CPU to it (nice 10), so they cannot starve its Raft
// heartbeats. False, with "<program>: cannot start etcd: <why>" printed, when
// it did not start.
inline bool start_bench_cluster(const char* program, int members, std::string* address,
                                std::unique_ptr<EtcdCluster>* cluster,
                                const BenchArgs* tuning = nullptr) {
  EtcdClusterOptions o;
  o.members = members;
  if (tuning != nullptr) {
    o.extra_args = tuning->etcd_flags;
    o.extra_env = tuning->etcd_env;
  }
  o.heartbeat_ms = 100;
  o.election_ms = 1000;
  if (std::string why = EtcdCluster::start(o, cluster); !why.empty()) {
    std::fprintf(stderr, "%s: cannot start etcd: %s\n", program, why.c_str());
    return false;
  }
  *address = (*cluster)->address();
  if (::nice(10) == -1) std::perror("nice");
  return true;
}

}  // namespace cc::test
