// Reading the job's shape from the environment: cc's own CC_* variables and
// those of torchrun, Open MPI, PMI/MPICH and Slurm (the table in the README).
// No CUDA here, so it is unit-tested on any machine.
#pragma once

#include <functional>
#include <string>

#include "common/status.hpp"

namespace cc::env {

// Looks a variable up; returns nullptr when unset. Tests pass a fake.
using Getenv = std::function<const char*(const char*)>;
Getenv process_env();

struct LaunchInfo {
  int rank = -1;
  int world_size = 0;
  int local_rank = -1;  // -1 when no launcher set one
  std::string master_addr;
  int master_port = 0;
  // Which variables supplied the values, for messages ("RANK", "SLURM_PROCID").
  std::string rank_var, world_size_var, local_rank_var, addr_var, port_var;
};

// Reads rank, world size, local rank, MASTER_ADDR and MASTER_PORT; the first
// variable found in each list wins. A missing or malformed variable is
// CC_ERR_INVALID_ARGUMENT whose words name the variable and what to set.
Status read_launch_info(const Getenv& getenv, LaunchInfo* out);

// Parses a whole decimal integer in [min, max]; errors name `name`.
Status parse_int(const char* name, const char* text, long long min, long long max, long long* out);

}  // namespace cc::env
