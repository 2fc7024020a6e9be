// The communicator behind cc_comm_t: a Core (lib/core: who it is, its NCCL
// communicators, its health) with the rest of its life around it: its
// settings, its rendezvous connection, the watchdog's view of it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cc/cc.h"
#include "common/status.hpp"
#include "lib/comm/embedded_server.hpp"
#include "lib/core/core.hpp"
#include "lib/launch/config.hpp"
#include "lib/watch/comm_watch.hpp"
#include "rendezvous/client.hpp"

namespace cc::comm {

inline constexpr uint32_t kCommLive = 0xcc0c0a11u;
inline constexpr uint32_t kCommDead = 0xdeadcc0cu;

}  // namespace cc::comm

struct cc_comm : cc::core::Core {
  std::atomic<uint32_t> magic{cc::comm::kCommLive};

  std::string job_id;
  cc::launch::ResolvedConfig config;
  int* scratch = nullptr;  // one device int for cc_barrier

  // The control channel and, on rank 0 in embedded mode, its share of the
  // rendezvous server.
  std::unique_ptr<cc::rv::Client> client;
  std::unique_ptr<cc::comm::EmbeddedServerRef> server;

  // The watchdog's view of this communicator (null with CC_WATCHDOG=0).
  std::unique_ptr<cc::watch::CommWatch> watch;

  cc_comm() = default;
  ~cc_comm() = default;
  cc_comm(const cc_comm&) = delete;
  cc_comm& operator=(const cc_comm&) = delete;
};

namespace cc::comm {

// Checks a handle at a call's entry: NULL and destroyed handles are
// CC_ERR_INVALID_ARGUMENT naming `call`.
Status check_handle(const char* call, const cc_comm* comm);

// The communicator's life; each returns a Status in words.
Status init(cc_comm_t* out, int rank, int nranks, const char* addr, int port,
            const cc_config_t* config, int local_rank);
Status check_init_args(cc_comm_t* comm, int rank, int nranks, const char* addr, int port);
// LOCAL_RANK for a plain cc_comm_init: -1 when no launcher set one.
Status local_rank_from_env(int* local_rank);
Status split(cc_comm* parent, int color, int key, cc_comm_t* newcomm, const cc_config_t* config);
// Leaves the job, frees NCCL and CUDA resources, and buries the handle.
void destroy(std::unique_ptr<cc_comm> c);
// Marks the communicator aborted and tells the other ranks, once.
void abort(cc_comm* c);

}  // namespace cc::comm
