// The Join a test's rank sends: "host" as given, pid 1000 + rank, NCCL
// 2.28.9, a short unique id on rank 0.
#pragma once

#include <cstdint>
#include <string>

#include "rendezvous/protocol.hpp"

namespace cc::test {

inline rv::Join join_msg(int rank, int world, const std::string& host, uint32_t timeout_ms = 1000) {
  rv::Join j;
  j.info.rank = rank;
  j.info.world_size = world;
  j.info.host = host;
  j.info.pid = static_cast<uint32_t>(1000 + rank);
  j.info.nccl_version = 22809;
  if (rank == 0) j.unique_id = {4, 2};
  j.timeout_ms = timeout_ms;
  return j;
}

}  // namespace cc::test
