// A communicator's birth: the device, then (startup.cpp) the network
// interface NCCL will use, the rendezvous (join, id) and the reachability
// test, then the NCCL communicators, the fast paths and the watchdog, all
// within one deadline. After the join, news from the rendezvous (a rank that
// failed) ends every wait, and this rank's own failure is told to the others.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include <cuda_runtime_api.h>

#include "common/log.hpp"
#include "common/return_if_error.hpp"
#include "common/settings.hpp"
#include "common/who.hpp"
#include "lib/comm/comm.hpp"
#include "lib/comm/fast_setup.hpp"
#include "lib/comm/init_listener.hpp"
#include "lib/comm/nccl_ids.hpp"
#include "lib/comm/parts.hpp"
#include "lib/comm/startup.hpp"
#include "lib/core/nccl_symbol.hpp"
#include "lib/launch/device.hpp"
#include "lib/launch/env.hpp"
#include "lib/launch/nccl_bootstrap.hpp"
#include "lib/launch/share_gpu.hpp"
#include "rendezvous/factory/address.hpp"

namespace cc::comm {
namespace {

using std::chrono::milliseconds;

// Creates the NCCL communicators from the ids: the non-blocking one first
// (so the deadline holds), then the blocking one split from it. News from
// the rendezvous (`interrupted`) ends the waits; the caller has its message.
Status init_nccl(cc_comm* c, std::vector<ncclUniqueId>& ids, Clock::time_point deadline,
                 const core::Interrupt& interrupted) {
  const ncclResult_t r = make_ctl_comm(c, ids, deadline, interrupted);
  if (r == ncclSuccess) return make_work_comm(c, deadline, interrupted);
  if (r == ncclInProgress) {
    return make_status(CC_ERR_TIMEOUT,
                       c->who() + ": NCCL did not finish creating the communicator (" +
                           ctl_init_call(ids.size()) + ", device " + std::to_string(c->device) +
                           ") within " + std::to_string(c->timeout.count()) +
                           " ms. Another rank may have failed, or NCCL's own connections "
                           "between hosts are blocked: check NCCL_SOCKET_IFNAME and firewalls, "
                           "run with NCCL_DEBUG=INFO, or raise CC_TIMEOUT_MS");
  }
  return core::nccl_failure(ctl_init_call(ids.size()), *c, r);
}

}  // namespace

Status init(cc_comm_t* out, int rank, int nranks, const rv::factory::Address& address,
            const cc_config_t* config, int local_rank) {
  const auto start_time = Clock::now();
  auto c = std::make_unique<cc_comm>();
  c->rank = rank;
  c->nranks = nranks;
  c->host = launch::host_name();
  c->pid = static_cast<uint32_t>(getpid());
  log_set_identity(rank, c->host);
  if (Status st = launch::resolve_config(config, settings::process_env(), &c->config); !st.ok()) {
    return make_status(st.code, c->who() + ": " + st.message);
  }
  c->timeout = milliseconds(c->config.timeout_ms);
  c->job_id = c->config.job_id;
  const auto deadline = start_time + c->timeout;
  if (c->config.share_gpu) {
    launch::prepare_shared_gpu(c->host, c->pid);
    log().info(
        "CC_SHARE_GPU: device {} shared with other ranks; to NCCL this process is host {} "
        "(NCCL over sockets, cc's kernels off: timings mean nothing)",
        c->config.device, getenv("NCCL_HOSTID"));
  }

  // The device first: a machine without one fails at once, before any wait.
  CC_RETURN_IF_ERROR(
      launch::choose_device(rank, c->host, c->config.device, local_rank, &c->device));
  if (cudaError_t e = cudaSetDevice(c->device); e != cudaSuccess) {
    cudaGetLastError();
    return make_status(CC_ERR_CUDA, c->who() + ": cudaSetDevice(" + std::to_string(c->device) +
                                        ") failed: " + cudaGetErrorString(e));
  }
  rv::MemberInfo info;
  info.rank = rank;
  info.world_size = nranks;
  info.host = c->host;
  info.pid = c->pid;
  CC_RETURN_IF_ERROR(launch::describe_device(rank, c->host, c->device, &info));

  // NCCL's interface, the join and the reachability test (startup.cpp):
  // rank 0 hosts the server unless the job has its own; the connection
  // stays open as the control channel.
  StartRequest request;
  request.rendezvous.address = address;
  request.rendezvous.config = c->config;
  request.rendezvous.info = info;
  request.rendezvous.deadline = deadline;
  // Rank 0 makes the first NCCL id; past the scalable init's threshold the
  // first rank of each of NCCL's bootstrap groups makes its group's.
  const int my_id = nccl_id_made_by(rank, nranks, c->config.nccl_ranks_per_id);
  const int id_count = nccl_ids_to_make(nranks, c->config.nccl_ranks_per_id);
  request.rendezvous.makes_id = my_id >= 0;
  RendezvousResult joined;
  Status st = start(
      std::move(request),
      [&](std::vector<uint8_t>* id_bytes) {
        if (id_count > 1)
          log().info("rank {} makes NCCL id {} of {}: a root of NCCL's scalable init", rank, my_id,
                     id_count);
        return make_nccl_ids(*c, 1, id_bytes);
      },
      &joined);
  c->server = std::move(joined.server);
  c->client = std::move(joined.client);
  c->comm_number = joined.comm_number;
  c->generation = joined.generation;  // above 0: a replacement for a failed rank
  c->seat = joined.seat;
  c->job_rank = rank;
  c->rendezvous = std::move(joined.rendezvous);
  c->recovered_from_failed.assign(joined.failed.begin(), joined.failed.end());
  if (!st.ok()) {
    discard(c.get());
    return st;
  }
  if (joined.rank >= 0 && joined.rank != rank) {
    discard(c.get());
    return make_status(CC_ERR_RENDEZVOUS, c->who() + ": the rendezvous gave this rank the number " +
                                              std::to_string(joined.rank) +
                                              " in the communicator it joined; is it a "
                                              "cc-rendezvous of the same version?");
  }
  c->keep_ctl = nccl_shrink_usable(c.get());

  // From here every failure ends the others' init too: this rank tells them,
  // or, when the rendezvous brought the cause, ends with that cause's message.
  const bool embedded = server_in_rank0(address, c->config.rendezvous);
  InitListener listener(*c->client, c->who(), rank, c->comm_number, joined.members, embedded);
  std::optional<Status> news;
  const core::Interrupt interrupted = [&] {
    if (!news) news = listener.news();
    return news.has_value();
  };
  auto failed = [&](Status why) {
    if (news) why = *news;
    Status out = listener.conclude(std::move(why), news.has_value());
    discard(c.get());
    return out;
  };

  std::vector<ncclUniqueId> ids;
  if (Status st = read_nccl_ids(joined.unique_id, nranks,
                                c->who() + ": the rendezvous at " + address.where(), &ids);
      !st.ok())
    return failed(st);
  const auto joined_at = Clock::now();
  if (Status st = init_nccl(c.get(), ids, deadline, interrupted); !st.ok()) return failed(st);
  const auto nccl_at = Clock::now();
  if (Status st = alloc_scratch(c.get()); !st.ok()) return failed(st);
  if (Status st = setup_fast_allreduce(c.get(), deadline, interrupted); !st.ok()) return failed(st);
  const auto fast_at = Clock::now();
  if (Status st = start_watch(c.get(), embedded); !st.ok()) return failed(st);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start_time);
  auto ms = [](Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); };
  log().debug(
      "{}: cc_comm_init took {} ms at the rendezvous (interface, join, every rank's arrival, "
      "reachability test), {} ms in NCCL ({} and ncclCommSplit), {} ms setting up cc's "
      "all-reduce, {} ms starting the watchdog",
      c->who(), ms(joined_at - start_time), ms(nccl_at - joined_at), ctl_init_call(ids.size()),
      ms(fast_at - nccl_at), ms(Clock::now() - fast_at));
  log().info(
      "communicator ready: rank {} of {}, generation {}, device {} ({}), host {}, job '{}', "
      "communicator {}, NCCL {} ({} from {} NCCL id{}), in {} ms",
      rank, nranks, c->generation, c->device, info.gpu_uuid, c->host, c->job_id, c->comm_number,
      info.nccl_version, ctl_init_call(ids.size()), ids.size(), ids.size() == 1 ? "" : "s",
      took.count());
  // cc's TLS covers its rendezvous, not NCCL's own sockets: say what NCCL can do, once.
  if (c->config.tls.on() || c->config.tls_server.on()) {
    static std::once_flag said;
    std::call_once(said, [&] {
      const bool has_set_encryption = core::nccl_symbol("ncclSetEncryption") != nullptr;
      log().info("{}", launch::nccl_bootstrap_tls_line(info.nccl_version, has_set_encryption));
    });
  }
  *out = c.release();
  return Status::success();
}

namespace {

std::string init_who(int rank) { return "cc_comm_init (" + cc::who(rank, {}) + ")"; }

}  // namespace

Status check_rank_args(cc_comm_t* comm, int rank, int nranks) {
  const std::string who = init_who(rank);
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
  return Status::success();
}

Status check_init_args(cc_comm_t* comm, int rank, int nranks, const char* addr, int port,
                       rv::factory::Address* address) {
  CC_RETURN_IF_ERROR(check_rank_args(comm, rank, nranks));
  const std::string who = init_who(rank);
  if (addr == nullptr || *addr == '\0')
    return make_status(
        CC_ERR_INVALID_ARGUMENT,
        who + ": master_addr is " + (addr == nullptr ? "NULL" : "empty") +
            "; pass rank 0's host name or IP address (MASTER_ADDR), tcp://host:port, or "
            "etcd://host:port,...");
  // An address that carries its port (tcp://, etcd://) leaves master_port unused.
  if (Status st = rv::factory::parse_address(addr, address); !st.ok())
    return make_status(st.code, who + ": master_addr: " + st.message);
  if (address->needs_port() && (port < 1 || port > 65535))
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       who + ": master_port " + std::to_string(port) +
                           " is outside 1..65535; pass the rendezvous port (MASTER_PORT)");
  address->set_port(port);  // a host alone's; the other forms keep their own
  return Status::success();
}

Status local_rank_from_env(int* local_rank) {
  return launch::read_local_rank(settings::process_env(), local_rank);
}

}  // namespace cc::comm
