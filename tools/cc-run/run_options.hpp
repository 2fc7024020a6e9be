// cc-run's command line: what it takes, its checks and its errors.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/factory/address.hpp"

namespace cc::tools::run {

constexpr int kUsageError = 2;

struct Options {
  int nproc = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // as given ("" = 127.0.0.1 with one node)
  int master_port = 0;
  cc::rv::factory::Address rendezvous;  // the address parsed, with a host's port
  std::string job_id;
  int grace_ms = 2000;
  int timeout_ms = 0;      // 0 = leave CC_TIMEOUT_MS as it is
  int max_restarts = -1;   // -1: a failed rank stops the job
  bool share_gpu = false;  // every rank on one GPU, each its own host to NCCL
  bool agent = true;       // the ranks reach the rendezvous through this cc-run (its node agent)
  std::vector<std::string> command;
};

// The options, or (for --help or a bad command line) the process ends here
// with cc-run's message and exit status.
Options parse_options(int argc, char** argv);

}  // namespace cc::tools::run
