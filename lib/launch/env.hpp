// The job's shape from the environment: rank, world size, local rank and the
// rendezvous address, from cc's own CC_* variables and those of torchrun,
// Open MPI, PMI/MPICH and Slurm (common/settings.cpp lists them). No CUDA
// here, so it is unit-tested on any machine.
#pragma once

#include <string>

#include "common/settings.hpp"
#include "common/status.hpp"
#include "rendezvous/factory/address.hpp"

namespace cc::launch {

using settings::Getenv;

struct LaunchInfo {
  int rank = -1;
  int world_size = 0;
  int local_rank = -1;  // -1 when no launcher set one
  std::string master_addr;  // a host, tcp://host:port or etcd://...
  int master_port = 0;      // 0 where the address carries its port
  // Which variables supplied the values, for messages ("RANK", "SLURM_PROCID").
  std::string rank_var, world_size_var, local_rank_var, addr_var, port_var;
  rv::factory::Address address;  // master_addr and master_port parsed, once
};

// Reads rank, world size, local rank, MASTER_ADDR and (for a host alone)
// MASTER_PORT; the first variable found in each list wins. A missing or malformed variable is
// CC_ERR_INVALID_ARGUMENT whose message names the variable and what to set.
Status read_launch_info(const Getenv& getenv, LaunchInfo* out);

// The local rank alone (cc_comm_init, cc-bench): -1 when no launcher set one.
Status read_local_rank(const Getenv& getenv, int* local_rank, std::string* var = nullptr);

}  // namespace cc::launch
