// What every backend the factory makes must do, whichever the address names:
// its store keeps a key for the job, and its membership joins a one-rank
// communicator and hands back its id. Shared by the rendezvous suite (cc's
// server by host and by tcp://) and the etcd suite (an etcd cluster).
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/client.hpp"
#include "rendezvous/store.hpp"

namespace cc::test {

// Sets `key` through one connection of the job and reads it through `reader`.
inline void check_store_round_trip(rv::Store& writer, rv::Store& reader, const std::string& key) {
  const std::vector<uint8_t> value{'v', '1'};
  cc::Status s = writer.set(key, value);
  INFO(s.message);
  REQUIRE(s.ok());
  std::vector<uint8_t> got;
  s = reader.get(key, &got, 2000);
  INFO(s.message);
  REQUIRE(s.ok());
  CHECK(got == value);
  int64_t n = 0;
  REQUIRE(reader.add(key + "/n", 5, &n).ok());
  CHECK(n == 5);
}

// Joins communicator `comm_number` alone, with a made-up NCCL id, and leaves.
inline void check_join_alone(rv::Membership& m, uint32_t comm_number) {
  rv::Join join;
  join.info.rank = 0;
  join.info.world_size = 1;
  join.info.comm_number = comm_number;
  join.info.host = "factory-test";
  join.info.pid = static_cast<uint32_t>(::getpid());
  join.info.nccl_version = 22809;
  join.unique_id.assign(128, 0x42);
  join.timeout_ms = 10000;
  rv::Joined joined;
  cc::Status s = m.join(join, &joined);
  INFO(s.message);
  REQUIRE(s.ok());
  CHECK(joined.unique_id == join.unique_id);
  CHECK(joined.generation == 0);
  s = m.leave();
  INFO(s.message);
  CHECK(s.ok());
}

}  // namespace cc::test
