// A rank's part of a communicator's rendezvous, without CUDA or NCCL: rank 0
// starts (or shares) the embedded server where the address names a server
// the job may host and the job has none of its own; every rank connects
// through the backend the factory makes for the address (rendezvous/factory)
// and joins, and the rendezvous hands out the ids (rank 0's, and those of
// the scalable init's other roots) once all have joined.
// Unit-tested with threads as ranks; on etcd, by tests/etcd with processes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "lib/comm/embedded_server.hpp"
#include "lib/launch/config.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::comm {

struct RendezvousRequest {
  // MASTER_ADDR (with MASTER_PORT), parsed once where it entered cc
  // (comm::check_init_args): a host, tcp://host:port, etcd://host:port,...
  rv::factory::Address address;
  launch::ResolvedConfig config;  // job_id, token, rendezvous, timeout
  rv::MemberInfo info;            // rank, world size, host, pid, versions, GPU
  uint32_t comm_number = 0;       // 0 = this process's next one for the job (tests set it)
  std::chrono::steady_clock::time_point deadline;
  // Besides rank 0, this rank makes an id (a root of NCCL's scalable init).
  bool makes_id = false;
};

struct RendezvousResult {
  std::unique_ptr<EmbeddedServerRef> server;  // rank 0 in embedded mode
  std::unique_ptr<rv::Client> client;         // stays open: the control channel
  rv::factory::Address rendezvous;  // where the client connected (a recovery connects there again)
  uint32_t comm_number = 0;
  std::vector<uint8_t> unique_id;  // the id every rank received
  // A replacement for a failed rank joins a later generation of the
  // communicator (its generation above 0, its rank in it, and the ranks of
  // the previous generation it replaced).
  uint32_t generation = 0;
  int32_t rank = -1;
  std::vector<int32_t> failed;
  std::vector<uint8_t> seat;  // proves this rank in a later recovery (rv::Joined::seat)
  std::vector<rv::MemberSummary> members;  // by rank, from rank 0 (cc's server: rank 0 only)
};

// make_id runs on rank 0 and on a rank that makes_id, once connected
// (ncclGetUniqueId there).
using MakeId = std::function<Status(std::vector<uint8_t>*)>;

// The n-th communicator this process creates through the rendezvous of a job.
uint32_t next_comm_number(const std::string& job_id);

Status rendezvous_join(RendezvousRequest request, const MakeId& make_id, RendezvousResult* out);

// A connection to the job's rendezvous that will hold a membership, made by
// the factory for whatever `address` names: the job id and token of
// `config`, its heartbeat window (on etcd the membership lease's TTL), and
// connect_timeout to reach it. `client` names the caller in cc's server's log.
Status connect_member(const rv::factory::Address& address, const launch::ResolvedConfig& config,
                      std::chrono::milliseconds connect_timeout, const std::string& client,
                      std::unique_ptr<rv::Client>* out);

}  // namespace cc::comm
