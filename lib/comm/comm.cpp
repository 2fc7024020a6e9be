// Communicator life: init through the rendezvous, split, abort, destroy.
#include "lib/comm/comm.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "common/last_error.hpp"
#include "common/log.hpp"
#include "lib/comm/args.hpp"
#include "lib/comm/rendezvous_join.hpp"
#include "lib/fast/fast_setup.hpp"
#include "lib/launch/device.hpp"
#include "lib/launch/env.hpp"
#include "lib/launch/netif.hpp"
#include "lib/watch/watchdog.hpp"

namespace cc {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Destroyed handles stay here, marked dead, so a later use is detected.
void bury(std::unique_ptr<cc_comm> comm) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<cc_comm>> graveyard;
  comm->magic.store(kCommDead, std::memory_order_release);
  comm->host.clear();
  comm->host.shrink_to_fit();
  comm->job_id.clear();
  comm->job_id.shrink_to_fit();
  std::lock_guard<std::mutex> lock(mu);
  graveyard.push_back(std::move(comm));
}

std::string who(int rank, const std::string& host) {
  return "rank " + std::to_string(rank) + " on host " + host;
}

// Restores the caller's current CUDA device on scope exit.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    if (device >= 0 && device != saved_) cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (saved_ >= 0) cudaSetDevice(saved_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = -1;
};

Status alloc_scratch(cc_comm* c) {
  DeviceScope scope(c->device);
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, sizeof(int));
  if (e == cudaSuccess) e = cudaMemset(p, 0, sizeof(int));
  if (e != cudaSuccess) {
    if (p != nullptr) cudaFree(p);
    cudaGetLastError();
    return make_status(CC_ERR_CUDA, who(c->rank, c->host) + ": cudaMalloc of the barrier's " +
                                        "scratch int on device " + std::to_string(c->device) +
                                        " failed: " + cudaGetErrorString(e));
  }
  c->scratch = static_cast<int*>(p);
  return Status::success();
}

void free_scratch(cc_comm* c) {
  if (c->scratch == nullptr) return;
  DeviceScope scope(c->device);
  cudaFree(c->scratch);
  c->scratch = nullptr;
}

// Hands a ready communicator to the process's watchdog (unless CC_WATCHDOG=0).
// A communicator with a rendezvous connection gets a control channel: the
// server watches its heartbeats from here on.
Status start_watch(cc_comm* c, bool embedded) {
  if (!Watchdog::enabled(env::process_env())) return Status::success();
  std::unique_ptr<ControlChannel> channel;
  if (c->client) {
    ChannelOptions o;
    o.rank = c->rank;
    o.host = c->host;
    o.pid = static_cast<uint32_t>(getpid());
    o.generation = c->generation;
    o.interval = milliseconds(c->config.heartbeat_ms);
    o.misses = c->config.heartbeat_misses;
    o.server_in_rank0 = embedded;
    channel = std::make_unique<ControlChannel>(*c->client, o);
    if (Status st = channel->start(); !st.ok()) return st;
  }
  if (Status st = CommWatch::create(c, std::move(channel), &c->watch); !st.ok()) return st;
  Watchdog::instance().add(c->watch.get());
  return Status::success();
}

void stop_watch(cc_comm* c) {
  if (!c->watch) return;
  Watchdog::instance().remove(c->watch.get());
}

// Frees what a half-made communicator holds, on an init failure.
void discard(cc_comm* c) {
  stop_watch(c);
  if (c->nccl != nullptr || c->nccl_ctl != nullptr) comm_abort_nccl(c);
  teardown_fast_allreduce(c);
  free_scratch(c);
  c->client.reset();
  if (c->server) c->server->release("", milliseconds(0));
  c->server.reset();
}

// NCCL's sockets go over the interface that reaches MASTER_ADDR (not a Docker
// bridge the other hosts cannot reach), unless NCCL_SOCKET_IFNAME is set.
// Must run before ncclGetUniqueId, which picks the bootstrap address.
void choose_socket_ifname(cc_comm* c, const std::string& addr, rv::MemberInfo* info) {
  netif::IfnameChoice choice;
  if (Status st = netif::choose_nccl_socket_ifname(addr, env::process_env(), &choice); !st.ok()) {
    log().warn("rank {}: {}; leaving NCCL to choose its network interface", c->rank, st.message);
    return;
  }
  if (choice.from_user) return;
  info->nccl_addr = choice.route.source_address;
  // Loopback reaches only this host: NCCL's own choice (which skips lo) is
  // right there, and stays right when other hosts join a node's 127.0.0.1.
  const std::string& src = choice.route.source_address;
  if (choice.ifname.empty() || src.rfind("127.", 0) == 0 || src == "::1") return;
  setenv("NCCL_SOCKET_IFNAME", ("=" + choice.ifname).c_str(), 0);
  log().info("rank {}: NCCL_SOCKET_IFNAME={} (the route to {} leaves from {})", c->rank,
             "=" + choice.ifname, addr, choice.route.source_address);
}

// Makes comm->nccl, the blocking communicator that does the work, by
// splitting the non-blocking comm->nccl_ctl with every rank in one colour.
// The split runs on the non-blocking parent, so it too has a deadline.
Status make_work_comm(cc_comm* c, Clock::time_point deadline) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  ncclComm_t work = nullptr;
  ncclResult_t r = ncclCommSplit(c->nccl_ctl, 0, c->rank, &work, &config);
  if (r == ncclInProgress || r == ncclSuccess) r = nccl_wait_ready(c, c->nccl_ctl, deadline);
  c->nccl = work;
  if (r == ncclSuccess && work != nullptr) r = nccl_wait_ready(c, work, deadline);
  if (r == ncclSuccess && work != nullptr) return Status::success();
  if (r == ncclInProgress) {
    return make_status(CC_ERR_TIMEOUT,
                       who(c->rank, c->host) + ": NCCL did not finish making the working " +
                           "communicator (ncclCommSplit) within " +
                           std::to_string(c->timeout.count()) +
                           " ms. Another rank may have failed: look at its output, or raise "
                           "CC_TIMEOUT_MS");
  }
  return nccl_failure("ncclCommSplit", c, r == ncclSuccess ? ncclInternalError : r);
}

// Creates the NCCL communicators from the id: the non-blocking one first
// (so the deadline holds), then the blocking one split from it.
Status init_nccl(cc_comm* c, const ncclUniqueId& id, Clock::time_point deadline) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t nccl = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&nccl, c->nranks, id, c->rank, &config);
  c->nccl_ctl = nccl;
  if (r == ncclInProgress || r == ncclSuccess) r = nccl_wait_ready(c, nccl, deadline);
  if (r == ncclSuccess) return make_work_comm(c, deadline);
  if (r == ncclInProgress) {
    return make_status(CC_ERR_TIMEOUT,
                       who(c->rank, c->host) + ": NCCL did not finish creating the " +
                           "communicator (ncclCommInitRankConfig, device " +
                           std::to_string(c->device) + ") within " +
                           std::to_string(c->timeout.count()) +
                           " ms. Another rank may have failed, or NCCL's own connections "
                           "between hosts are blocked: check NCCL_SOCKET_IFNAME and firewalls, "
                           "run with NCCL_DEBUG=INFO, or raise CC_TIMEOUT_MS");
  }
  return nccl_failure("ncclCommInitRankConfig", c, r);
}

Status init_comm(cc_comm_t* out, int rank, int nranks, const char* addr_c, int port,
                 const cc_config_t* config, int local_rank) {
  const auto start = Clock::now();
  auto c = std::make_unique<cc_comm>();
  c->rank = rank;
  c->nranks = nranks;
  c->host = host_name();
  log_set_identity(rank, c->host);
  if (Status st = resolve_config(config, env::process_env(), &c->config); !st.ok()) {
    return make_status(st.code, who(rank, c->host) + ": " + st.message);
  }
  c->timeout = milliseconds(c->config.timeout_ms);
  c->job_id = c->config.job_id;
  const auto deadline = start + c->timeout;

  // The device first: a machine without one fails at once, before any wait.
  if (Status st = choose_device(rank, c->host, c->config.device, local_rank, &c->device); !st.ok())
    return st;
  if (cudaError_t e = cudaSetDevice(c->device); e != cudaSuccess) {
    cudaGetLastError();
    return make_status(CC_ERR_CUDA, who(rank, c->host) + ": cudaSetDevice(" +
                                        std::to_string(c->device) +
                                        ") failed: " + cudaGetErrorString(e));
  }
  rv::MemberInfo info;
  info.rank = rank;
  info.world_size = nranks;
  info.host = c->host;
  info.pid = static_cast<uint32_t>(getpid());
  if (Status st = describe_device(rank, c->host, c->device, &info); !st.ok()) return st;

  const std::string addr = addr_c;
  choose_socket_ifname(c.get(), addr, &info);

  // Rendezvous: rank 0 hosts the server unless the job has its own; the
  // connection stays open as the control channel.
  RendezvousRequest request;
  request.addr = addr;
  request.port = port;
  request.config = c->config;
  request.info = info;
  request.deadline = deadline;
  RendezvousResult joined;
  Status st = rendezvous_join(
      std::move(request),
      [&](std::vector<uint8_t>* id_bytes) {
        ncclUniqueId id;
        if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
          return nccl_failure("ncclGetUniqueId", c.get(), r);
        id_bytes->assign(id.internal, id.internal + sizeof id.internal);
        return Status::success();
      },
      &joined);
  c->server = std::move(joined.server);
  c->client = std::move(joined.client);
  c->generation = joined.generation;
  if (!st.ok()) {
    discard(c.get());
    return st;
  }
  ncclUniqueId id;
  if (joined.unique_id.size() != sizeof id.internal) {
    discard(c.get());
    return make_status(CC_ERR_RENDEZVOUS, who(rank, c->host) + ": the rendezvous at " + addr + ":" +
                                              std::to_string(port) + " handed out an NCCL id of " +
                                              std::to_string(joined.unique_id.size()) +
                                              " bytes instead of " +
                                              std::to_string(sizeof id.internal) +
                                              "; is it a cc-rendezvous of the same version?");
  }
  std::memcpy(id.internal, joined.unique_id.data(), sizeof id.internal);

  if (Status st = init_nccl(c.get(), id, deadline); !st.ok()) {
    discard(c.get());
    return st;
  }
  if (Status st = alloc_scratch(c.get()); !st.ok()) {
    discard(c.get());
    return st;
  }
  if (Status st = setup_fast_allreduce(c.get(), deadline); !st.ok()) {
    discard(c.get());
    return st;
  }
  if (Status st = start_watch(c.get(), c->config.rendezvous == CC_RENDEZVOUS_EMBEDDED); !st.ok()) {
    discard(c.get());
    return st;
  }
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  log().info(
      "communicator ready: rank {} of {}, device {} ({}), host {}, job '{}' #{}, "
      "NCCL {}, in {} ms",
      rank, nranks, c->device, info.gpu_uuid, c->host, c->job_id, c->generation, info.nccl_version,
      took.count());
  *out = c.release();
  return Status::success();
}

Status check_init_args(cc_comm_t* comm, int rank, int nranks, const char* addr, int port) {
  const std::string who = "cc_comm_init (rank " + std::to_string(rank) + ")";
  if (comm == nullptr)
    return make_status(CC_ERR_INVALID_ARGUMENT, who +
                                                    ": comm is NULL; pass the address of a "
                                                    "cc_comm_t to receive the communicator");
  if (nranks < 1)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       who + ": nranks " + std::to_string(nranks) + " must be at least 1");
  if (rank < 0 || rank >= nranks)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       who + ": rank " + std::to_string(rank) +
                           " is outside [0, nranks=" + std::to_string(nranks) + ")");
  if (addr == nullptr || *addr == '\0')
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       who + ": master_addr is " + (addr == nullptr ? "NULL" : "empty") +
                           "; pass rank 0's host name or IP address (MASTER_ADDR)");
  if (port < 1 || port > 65535)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       who + ": master_port " + std::to_string(port) +
                           " is outside 1..65535; pass the rendezvous port (MASTER_PORT)");
  return Status::success();
}

// LOCAL_RANK for a plain cc_comm_init: -1 when no launcher set one.
Status local_rank_from_env(int* local_rank) {
  *local_rank = -1;
  auto getenv = env::process_env();
  for (const char* name : {"CC_LOCAL_RANK", "LOCAL_RANK"}) {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') continue;
    long long value = 0;
    if (Status st = env::parse_int(name, v, 0, 1 << 20, &value); !st.ok()) return st;
    *local_rank = static_cast<int>(value);
    return Status::success();
  }
  return Status::success();
}

Status split_comm(cc_comm* parent, int color, int key, cc_comm_t* newcomm,
                  const cc_config_t* config) {
  auto c = std::make_unique<cc_comm>();
  if (Status st = resolve_config(config, env::process_env(), &c->config); !st.ok())
    return make_status(st.code, "cc_comm_split (rank " + std::to_string(parent->rank) + ", host " +
                                    parent->host + "): " + st.message);
  c->timeout = milliseconds(c->config.timeout_ms);
  c->host = parent->host;
  c->job_id = parent->job_id;
  c->device = parent->device;
  const auto deadline = Clock::now() + c->timeout;

  ncclConfig_t nconfig = NCCL_CONFIG_INITIALIZER;
  nconfig.blocking = 0;
  ncclComm_t child = nullptr;
  ncclResult_t r;
  {
    CallGuard guard(parent);
    if (!comm_usable(parent)) return comm_state_status("cc_comm_split", parent);
    DeviceScope scope(parent->device);
    r = ncclCommSplit(parent->nccl_ctl, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child,
                      &nconfig);
    if (r == ncclInProgress || r == ncclSuccess)
      r = nccl_wait_ready(parent, parent->nccl_ctl, deadline);
  }
  c->nccl_ctl = child;
  if (r == ncclSuccess && child != nullptr) r = nccl_wait_ready(c.get(), child, deadline);
  if (r != ncclSuccess) {
    Status st = r == ncclInProgress
                    ? make_status(CC_ERR_TIMEOUT,
                                  who(parent->rank, parent->host) +
                                      ": ncclCommSplit did not finish within " +
                                      std::to_string(c->timeout.count()) +
                                      " ms; every rank of the parent must call cc_comm_split")
                    : nccl_failure("ncclCommSplit", parent, r);
    if (child != nullptr) comm_abort_nccl(c.get());
    return st;
  }
  if (child == nullptr) return Status::success();  // negative color: no new communicator
  if (ncclCommUserRank(child, &c->rank) != ncclSuccess ||
      ncclCommCount(child, &c->nranks) != ncclSuccess) {
    comm_abort_nccl(c.get());
    return make_status(CC_ERR_NCCL, who(parent->rank, parent->host) +
                                        ": could not read the rank of the new communicator");
  }
  {
    DeviceScope scope(c->device);
    if (Status st = make_work_comm(c.get(), deadline); !st.ok()) {
      comm_abort_nccl(c.get());
      return st;
    }
  }
  if (Status st = alloc_scratch(c.get()); !st.ok()) {
    comm_abort_nccl(c.get());
    return st;
  }
  Status fast_st;
  {
    DeviceScope scope(c->device);
    fast_st = setup_fast_allreduce(c.get(), deadline);
  }
  if (!fast_st.ok()) {
    comm_abort_nccl(c.get());
    teardown_fast_allreduce(c.get());
    free_scratch(c.get());
    return fast_st;
  }
  c->parent = parent;
  if (Status st = start_watch(c.get(), false); !st.ok()) {
    comm_abort_nccl(c.get());
    teardown_fast_allreduce(c.get());
    free_scratch(c.get());
    return st;
  }
  log().debug("split: parent rank {} -> color {} rank {} of {}", parent->rank, color, c->rank,
              c->nranks);
  *newcomm = c.release();
  return Status::success();
}

// Finalizes and destroys one NCCL communicator within the deadline; false
// when that did not work (the caller aborts instead).
bool finalize_nccl(cc_comm* c, ncclComm_t nccl, Clock::time_point deadline) {
  ncclResult_t r = ncclCommFinalize(nccl);
  if (r == ncclSuccess || r == ncclInProgress) r = nccl_wait_ready(c, nccl, deadline);
  if (r != ncclSuccess) {
    log().warn("rank {}: ncclCommFinalize {} ({}); aborting the NCCL communicator instead", c->rank,
               r == ncclInProgress ? "did not finish in time" : "failed", ncclGetErrorString(r));
    return false;
  }
  ncclCommDestroy(nccl);
  return true;
}

void destroy_comm(std::unique_ptr<cc_comm> c) {
  stop_watch(c.get());  // no tick runs on it from here on
  const bool healthy = comm_usable(c.get()) && !c->abort_requested.load();
  if (healthy && (c->nccl != nullptr || c->nccl_ctl != nullptr)) {
    const auto deadline = Clock::now() + c->timeout;
    DeviceScope scope(c->device);
    bool ok = drain_fast_allreduce(c.get(), deadline);  // NCCL frees its inbox next
    ok = ok && (c->nccl == nullptr || finalize_nccl(c.get(), c->nccl, deadline));
    if (ok) c->nccl = nullptr;
    ok = ok && (c->nccl_ctl == nullptr || finalize_nccl(c.get(), c->nccl_ctl, deadline));
    if (ok) c->nccl_ctl = nullptr;
    if (!ok) comm_abort_nccl(c.get());
  } else {
    comm_abort_nccl(c.get());  // no-op when already aborted or nothing to abort
  }
  c->nccl = nullptr;
  c->nccl_ctl = nullptr;
  {
    DeviceScope scope(c->device);
    teardown_fast_allreduce(c.get());
  }
  free_scratch(c.get());
  c->watch.reset();  // its CUDA event, once NCCL is done with the streams
  if (c->client) {
    if (healthy) {
      if (Status st = c->client->leave(); !st.ok())
        log().debug("rank {}: leaving the rendezvous: {}", c->rank, st.message);
    }
    c->client.reset();
  }
  if (c->server) {
    c->server->release(c->job_id, std::min(c->timeout, milliseconds(10000)));
    c->server.reset();
  }
  log().debug("rank {}: communicator destroyed", c->rank);
  bury(std::move(c));
}

}  // namespace

// ---- shared with collectives.cpp and the watchdog ------------------------

Status check_comm_handle(const char* call, const cc_comm* comm) {
  if (comm == nullptr)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       std::string(call) +
                           ": comm is NULL; create one with cc_comm_init or "
                           "cc_comm_init_from_env first");
  const uint32_t magic = comm->magic.load(std::memory_order_acquire);
  if (magic == kCommLive) return Status::success();
  if (magic == kCommDead)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       std::string(call) + ": comm was destroyed (cc_comm_destroy); a " +
                           "destroyed handle cannot be used again, create a new communicator");
  return make_status(CC_ERR_INVALID_ARGUMENT,
                     std::string(call) + ": comm is not a cc communicator (bad handle)");
}

Status comm_state_status(const char* call, cc_comm* comm) {
  const auto state = static_cast<CommState>(comm->state.load(std::memory_order_acquire));
  std::string story;
  {
    std::lock_guard<std::mutex> lock(comm->failure_mu);
    story = comm->failure;
  }
  cc_result_t code = CC_ERR_ABORTED;
  if (state == CommState::peer_failed) code = CC_ERR_PEER_FAILED;
  if (state == CommState::timed_out) code = CC_ERR_TIMEOUT;
  if (state == CommState::ok) {  // only an abort request in flight
    story = "the communicator is being aborted";
  }
  return make_status(code, std::string(call) + " on rank " + std::to_string(comm->rank) +
                               " (host " + comm->host + "): " + story);
}

bool comm_fail(cc_comm* comm, CommState state, const std::string& story, int calls_held) {
  int expected = static_cast<int>(CommState::ok);
  {
    std::lock_guard<std::mutex> lock(comm->failure_mu);
    if (!comm->state.compare_exchange_strong(expected, static_cast<int>(state),
                                             std::memory_order_seq_cst))
      return false;
    comm->failure = story;
  }
  comm_abort_nccl(comm, calls_held);
  return true;
}

void comm_abort_nccl(cc_comm* comm, int calls_held) {
  if (comm->abort_requested.exchange(true, std::memory_order_seq_cst)) return;
  fast::request_abort(comm->fast);  // its kernels poll for this; NCCL's abort won't reach them
  if (comm->nccl == nullptr && comm->nccl_ctl == nullptr) return;
  const auto until = Clock::now() + milliseconds(500);
  while (comm->calls_in_flight.load(std::memory_order_seq_cst) > calls_held &&
         Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (comm->nccl != nullptr) ncclCommAbort(comm->nccl);
  if (comm->nccl_ctl != nullptr) ncclCommAbort(comm->nccl_ctl);
  log().debug("rank {}: NCCL communicator aborted", comm->rank);
}

ncclResult_t nccl_wait_ready(cc_comm* comm, ncclComm_t nccl, Clock::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  for (unsigned spin = 0;; ++spin) {
    if (ncclResult_t r = ncclCommGetAsyncError(nccl, &state); r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (comm->abort_requested.load(std::memory_order_relaxed)) return ncclInProgress;
    if (spin < 64) {
      std::this_thread::yield();
      continue;
    }
    if (Clock::now() >= deadline) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(spin < 1000 ? 20 : 500));
  }
}

Status nccl_failure(const char* nccl_call, const cc_comm* comm, ncclResult_t result) {
  const char* last = ncclGetLastError(comm->abort_requested.load() ? nullptr : comm->nccl);
  std::string text = std::string(nccl_call) + " failed on rank " + std::to_string(comm->rank) +
                     " (host " + comm->host + "): " + ncclGetErrorString(result);
  if (last != nullptr && *last != '\0') text += std::string(": ") + last;
  text += ". Run with NCCL_DEBUG=WARN (or INFO) for NCCL's own account";
  return make_status(result == ncclUnhandledCudaError ? CC_ERR_CUDA : CC_ERR_NCCL, std::move(text));
}

}  // namespace cc

// ---- the C API -------------------------------------------------------------

extern "C" {

CC_API cc_result_t cc_comm_init(cc_comm_t* comm, int rank, int nranks, const char* master_addr,
                                int master_port, const cc_config_t* config) {
  CC_API_GUARD_BEGIN
  if (comm != nullptr) *comm = nullptr;
  if (cc::Status st = cc::check_init_args(comm, rank, nranks, master_addr, master_port); !st.ok())
    return cc::fail(st);
  int local_rank = -1;
  if (cc::Status st = cc::local_rank_from_env(&local_rank); !st.ok()) return cc::fail(st);
  return cc::fail(cc::init_comm(comm, rank, nranks, master_addr, master_port, config, local_rank));
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_init_from_env(cc_comm_t* comm, const cc_config_t* config) {
  CC_API_GUARD_BEGIN
  if (comm == nullptr)
    return cc::fail(CC_ERR_INVALID_ARGUMENT,
                    "cc_comm_init_from_env: comm is NULL; pass the address of a cc_comm_t");
  *comm = nullptr;
  cc::env::LaunchInfo info;
  if (cc::Status st = cc::env::read_launch_info(cc::env::process_env(), &info); !st.ok())
    return cc::fail(st.code, "cc_comm_init_from_env: " + st.message);
  if (cc::Status st = cc::check_init_args(comm, info.rank, info.world_size,
                                          info.master_addr.c_str(), info.master_port);
      !st.ok())
    return cc::fail(st);
  return cc::fail(cc::init_comm(comm, info.rank, info.world_size, info.master_addr.c_str(),
                                info.master_port, config, info.local_rank));
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_split(cc_comm_t comm, int color, int key, cc_comm_t* newcomm,
                                 const cc_config_t* config) {
  CC_API_GUARD_BEGIN
  if (newcomm != nullptr) *newcomm = nullptr;
  if (cc::Status st = cc::check_comm_handle("cc_comm_split", comm); !st.ok()) return cc::fail(st);
  if (newcomm == nullptr)
    return cc::fail(CC_ERR_INVALID_ARGUMENT,
                    "cc_comm_split (rank " + std::to_string(comm->rank) + ", host " + comm->host +
                        "): newcomm is NULL; pass the address of a cc_comm_t");
  if (!cc::comm_usable(comm)) return cc::fail(cc::comm_state_status("cc_comm_split", comm));
  return cc::fail(cc::split_comm(comm, color, key, newcomm, config));
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_destroy(cc_comm_t comm) {
  CC_API_GUARD_BEGIN
  if (comm == nullptr) return cc::succeed();
  if (cc::Status st = cc::check_comm_handle("cc_comm_destroy", comm); !st.ok()) return cc::fail(st);
  cc::destroy_comm(std::unique_ptr<cc_comm>(comm));
  return cc::succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_abort(cc_comm_t comm) {
  CC_API_GUARD_BEGIN
  if (cc::Status st = cc::check_comm_handle("cc_comm_abort", comm); !st.ok()) return cc::fail(st);
  const std::string story = "the communicator was aborted by cc_comm_abort on rank " +
                            std::to_string(comm->rank) + " (host " + comm->host +
                            "); destroy it with cc_comm_destroy and create a new one";
  if (cc::comm_fail(comm, cc::CommState::aborted, story) && comm->client) {
    if (cc::Status st = comm->client->abort_nowait(story); !st.ok())
      cc::log().debug("rank {}: telling the rendezvous about the abort: {}", comm->rank,
                      st.message);
  }
  return cc::succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_rank(cc_comm_t comm, int* rank) {
  CC_API_GUARD_BEGIN
  if (cc::Status st = cc::check_comm_handle("cc_comm_rank", comm); !st.ok()) return cc::fail(st);
  if (rank == nullptr) return cc::fail(CC_ERR_INVALID_ARGUMENT, "cc_comm_rank: rank is NULL");
  *rank = comm->rank;
  return cc::succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_size(cc_comm_t comm, int* nranks) {
  CC_API_GUARD_BEGIN
  if (cc::Status st = cc::check_comm_handle("cc_comm_size", comm); !st.ok()) return cc::fail(st);
  if (nranks == nullptr) return cc::fail(CC_ERR_INVALID_ARGUMENT, "cc_comm_size: nranks is NULL");
  *nranks = comm->nranks;
  return cc::succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_device(cc_comm_t comm, int* cuda_device) {
  CC_API_GUARD_BEGIN
  if (cc::Status st = cc::check_comm_handle("cc_comm_device", comm); !st.ok()) return cc::fail(st);
  if (cuda_device == nullptr)
    return cc::fail(CC_ERR_INVALID_ARGUMENT, "cc_comm_device: cuda_device is NULL");
  *cuda_device = comm->device;
  return cc::succeed();
  CC_API_GUARD_END
}

}  // extern "C"
