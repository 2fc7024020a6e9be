// What the reachability test adds to a healthy start of 2 ranks: two
// threads run cc_comm_init's path without NCCL (lib/comm/startup) on
// loopback, as two hosts, `rounds` times with the test and `rounds` times
// without; prints the medians and their difference. False when a start failed.
#pragma once

#include <string>
#include <vector>

namespace cc::tools::rendezvous_bench {

bool run_start_pair(int rounds);

// How one start of 2 ranks runs.
struct PairSetup {
  bool preflight = true;              // the reachability test (CC_PREFLIGHT)
  bool one_host = false;              // both ranks on one host (nothing to test), else two
  std::string address = "127.0.0.1";  // MASTER_ADDR: a host, or an etcd://... cluster
  // A server already running at the address; 0: rank 0 hosts one (an etcd
  // cluster is the rendezvous whatever this says).
  int server_port = 0;
  std::string agent_socket;  // the ranks' node agent (CC_AGENT_SOCKET); "": none
  std::string job_prefix = "pair-";
};

// One start of 2 ranks as threads (cc_comm_init's path without NCCL,
// lib/comm/startup), round `round`'s job; *ms: the slower rank's time
// (cc_comm_init returns on both only then). False when it failed with a message.
bool start_two(const PairSetup& setup, int round, double* ms);

double median(std::vector<double> v);

}  // namespace cc::tools::rendezvous_bench
