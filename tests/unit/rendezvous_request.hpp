// The rendezvous request of a rank that a test plays as a thread on loopback.
#pragma once

#include <chrono>
#include <cstdlib>
#include <string>

#include "lib/comm/rendezvous_join.hpp"

namespace cc::test {

// Rank `rank` of `world` as host "host<rank>", pid 1000 + rank, NCCL 2.28.9.
inline rv::MemberInfo member_info(int rank, int world) {
  rv::MemberInfo m;
  m.rank = rank;
  m.world_size = world;
  m.host = "host" + std::to_string(rank);
  m.pid = 1000u + static_cast<uint32_t>(rank);
  m.nccl_version = 22809;
  return m;
}

// That rank joining generation 1 of `job` at 127.0.0.1:port, given `timeout`.
inline comm::RendezvousRequest rendezvous_request(int rank, int world, int port,
                                                  const std::string& job,
                                                  std::chrono::milliseconds timeout) {
  comm::RendezvousRequest r;
  // A literal loopback address with its port: it always parses.
  if (!rv::factory::parse_address("127.0.0.1", port, &r.address).ok()) std::abort();
  r.config.job_id = job;
  r.config.timeout_ms = static_cast<int>(timeout.count());
  r.info = member_info(rank, world);
  r.comm_number = 1;
  r.deadline = std::chrono::steady_clock::now() + timeout;
  return r;
}

}  // namespace cc::test
