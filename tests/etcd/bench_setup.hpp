// What the two etcd benchmarks (cc-etcd-rendezvous-bench, cc-etcd-store-bench)
// share: their cluster options (--members, --address), the words of a wrong
// argument, a high open-file limit, and the local cluster they start when no
// --address is given.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "tests/etcd/etcd_cluster.hpp"
#include "tools/cli/cli.hpp"

namespace cc::test {

// --members M (the cluster started here) and --address ADDR (one to use instead).
inline void add_cluster_options(CLI::App& app, int* members, std::string* address) {
  cc::cli::add_number(app, "--members", "M", 1, 9, members,
                      "members of the cluster started here (default 3)");
  cc::cli::add_value(app, "--address", "ADDR", "an etcd cluster to run against instead",
                     [address](const std::string& v) {
                       if (v.empty()) cc::cli::reject("--address is empty");
                       *address = v;
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
                                std::unique_ptr<EtcdCluster>* cluster) {
  EtcdClusterOptions o;
  o.members = members;
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
