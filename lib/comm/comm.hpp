// The communicator behind cc_comm_t: a Core (lib/core: who it is, its NCCL
// communicators, its health) with the rest of its life around it: its
// settings, its rendezvous connection, the watchdog's view of it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "common/status.hpp"
#include "lib/comm/embedded_server.hpp"
#include "lib/core/core.hpp"
#include "lib/launch/config.hpp"
#include "lib/watch/comm_watch.hpp"
#include "lib/watch/graph_replays.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/factory/address.hpp"

namespace cc::comm {

inline constexpr uint32_t kCommLive = 0xcc0c0a11u;
inline constexpr uint32_t kCommDead = 0xdeadcc0cu;

}  // namespace cc::comm

struct cc_comm : cc::core::Core {
  std::atomic<uint32_t> magic{cc::comm::kCommLive};

  std::string job_id;
  cc::launch::ResolvedConfig config;
  int* scratch = nullptr;  // one device int for cc_barrier

  // For a recovery (lib/comm/recover.cpp): where the rendezvous connection
  // went (none for a child of cc_comm_split, which has no connection of its
  // own), the rank this process joined the communicator's generation 0 with
  // (or was started with, as a replacement), and, for a communicator made by
  // a recovery, the ranks of the previous generation it left out or replaced.
  std::optional<cc::rv::factory::Address> rendezvous;
  int job_rank = -1;
  std::vector<int> recovered_from_failed;
  bool nccl_shrink_failed = false;  // the next shrink of it makes a new NCCL communicator

  // The control channel and, on rank 0 in embedded mode, its share of the
  // rendezvous server.
  std::unique_ptr<cc::rv::Client> client;
  std::unique_ptr<cc::comm::EmbeddedServerRef> server;
  // A split child's destroy compares its calls through its parent's client
  // under the parent's client_mu; the parent's destroy marks it closing
  // there first, after which no child uses it.
  std::mutex client_mu;
  bool client_closing = false;  // under client_mu

  // For a child of cc_comm_split: its parent, its number among the parent's
  // splits (1, 2, ...) and its color, the same on every member.
  cc_comm* split_parent = nullptr;
  uint32_t split_number = 0;
  int split_color = 0;

  // Its calls, their fingerprints and the flight recorder (made with the
  // watch, kept with CC_WATCHDOG=0 too); declared before `watch`, which
  // points at it.
  std::unique_ptr<cc::watch::FlightRecorder> recorder;
  // The replays of CUDA graphs that captured its calls, on the recorder's
  // call log (with the check on); declared after `recorder`, which it uses.
  // The graphs themselves are counted in Core::graphs, check or not.
  std::unique_ptr<cc::watch::GraphReplays> graph_replays;
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

// The communicator's life; each returns a Status with its message.
// The address is parsed once, by check_init_args at the API's edge, and
// travels parsed from there to the connection.
Status init(cc_comm_t* out, int rank, int nranks, const rv::factory::Address& address,
            const cc_config_t* config, int local_rank);
Status check_init_args(cc_comm_t* comm, int rank, int nranks, const char* addr, int port,
                       rv::factory::Address* address);
// The same without the address (cc_comm_init_from_env's, parsed with the
// environment: lib/launch/env.hpp).
Status check_rank_args(cc_comm_t* comm, int rank, int nranks);
// LOCAL_RANK for a plain cc_comm_init: -1 when no launcher set one.
Status local_rank_from_env(int* local_rank);
Status split(cc_comm* parent, int color, int key, cc_comm_t* newcomm, const cc_config_t* config);
// Compares the ranks' calls up to their last, leaves the job, frees NCCL and
// CUDA resources, and buries the handle; CC_ERR_MISMATCH when the calls
// differ (the handle is gone all the same).
Status destroy(std::unique_ptr<cc_comm> c);
// CC_ERR_INVALID_USAGE while CUDA graphs that captured c's calls are alive
// (c->graphs; waiting a second for their release): NCCL's destroy would
// wait for them without a deadline. c is untouched either way.
Status graphs_released(const cc_comm* c);
// Marks the communicator aborted and tells the other ranks, once.
void abort(cc_comm* c);

// Recovery (recover.cpp): the next generation of c without the ranks the
// rendezvous declared failed, renumbered densely (shrink), or of nranks ranks
// with replacements for them (regrow). timeout_ms <= 0: c's deadline.
Status shrink(cc_comm* c, int timeout_ms, cc_comm_t* newcomm);
Status regrow(cc_comm* c, int nranks, int timeout_ms, cc_comm_t* newcomm);
// cc_comm_failed_ranks: see cc.h.
std::vector<int> failed_ranks(const cc_comm* c);
// Whether cc_comm_shrink may use ncclCommShrink on c's control communicator:
// the NCCL loaded has it, CC_NCCL_SHRINK allows it, c has a rendezvous.
bool nccl_shrink_usable(const cc_comm* c);

}  // namespace cc::comm
