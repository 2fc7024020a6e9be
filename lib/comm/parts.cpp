#include "lib/comm/parts.hpp"

#include <algorithm>
#include <atomic>
#include <memory>

#include <cuda_runtime_api.h>

#include "common/return_if_error.hpp"
#include "lib/comm/fast_setup.hpp"
#include "lib/comm/nccl_ids.hpp"
#include "lib/watch/trace_signal.hpp"
#include "lib/watch/watchdog.hpp"

namespace cc::comm {

using std::chrono::milliseconds;

ncclResult_t make_ctl_comm(cc_comm* c, std::vector<ncclUniqueId>& ids, Clock::time_point deadline,
                           const core::Interrupt& interrupted) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t nccl = nullptr;
  // Every rank has the same NCCL major.minor (the join checks it), so where
  // the scalable init is missing rank 0 made one id.
  const InitRankScalableFn scalable = nccl_init_rank_scalable();
  if (scalable == nullptr) ids.resize(1);
  ncclResult_t r =
      ids.size() == 1
          ? ncclCommInitRankConfig(&nccl, c->nranks, ids[0], c->rank, &config)
          : scalable(&nccl, c->nranks, c->rank, static_cast<int>(ids.size()), ids.data(), &config);
  c->nccl_ctl = nccl;
  if (r == ncclInProgress || r == ncclSuccess)
    r = core::wait_ready(*c, nccl, deadline, interrupted);
  return r;
}

const char* ctl_init_call(size_t id_count) {
  return id_count == 1 ? "ncclCommInitRankConfig" : "ncclCommInitRankScalable";
}

Status make_work_comm(cc_comm* c, Clock::time_point deadline, const core::Interrupt& interrupted) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  ncclComm_t work = nullptr;
  ncclResult_t r = ncclCommSplit(c->nccl_ctl, 0, c->rank, &work, &config);
  if (r == ncclInProgress || r == ncclSuccess)
    r = core::wait_ready(*c, c->nccl_ctl, deadline, interrupted);
  c->nccl = work;
  if (r == ncclSuccess && work != nullptr) r = core::wait_ready(*c, work, deadline, interrupted);
  if (r == ncclSuccess && work != nullptr) return Status::success();
  if (r == ncclInProgress) {
    return make_status(CC_ERR_TIMEOUT, c->who() +
                                           ": NCCL did not finish making the working "
                                           "communicator (ncclCommSplit) within " +
                                           std::to_string(c->timeout.count()) +
                                           " ms. Another rank may have failed: look at its "
                                           "output, or raise CC_TIMEOUT_MS");
  }
  return core::nccl_failure("ncclCommSplit", *c, r == ncclSuccess ? ncclInternalError : r);
}

Status alloc_scratch(cc_comm* c) {
  core::DeviceScope scope(c->device);
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, sizeof(int));
  if (e == cudaSuccess) e = cudaMemset(p, 0, sizeof(int));
  if (e != cudaSuccess) {
    if (p != nullptr) cudaFree(p);
    cudaGetLastError();
    return make_status(CC_ERR_CUDA, c->who() + ": cudaMalloc of the barrier's scratch int on " +
                                        "device " + std::to_string(c->device) +
                                        " failed: " + cudaGetErrorString(e));
  }
  c->scratch = static_cast<int*>(p);
  return Status::success();
}

void free_scratch(cc_comm* c) {
  if (c->scratch == nullptr) return;
  core::DeviceScope scope(c->device);
  cudaFree(c->scratch);
  c->scratch = nullptr;
}

Status start_watch(cc_comm* c, bool embedded, const SplitOf& split_of) {
  // Split children are numbered in the order this process made them, which
  // names their trace files the same on every rank that splits alike.
  static std::atomic<int> splits{0};
  const int split = c->parent != nullptr ? splits.fetch_add(1) + 1 : 0;
  watch::TraceIdentity id{c->job_id, c->comm_number, c->generation, split,
                          c->rank,   c->nranks,      c->host,       c->pid};
  // With neither the check nor a ring, calls are not recorded at all.
  if (c->config.check_calls || c->config.trace_buffer > 0)
    c->recorder = std::make_unique<watch::FlightRecorder>(
        *c, std::move(id), static_cast<size_t>(c->config.trace_buffer), c->config.trace_dir);
  if (c->recorder && !c->config.trace_dir.empty()) watch::install_trace_signal();
  if (c->recorder && c->config.check_calls)
    c->graph_replays = std::make_unique<watch::GraphReplays>(c->recorder->calls());
  if (!watch::Watchdog::enabled()) return Status::success();
  std::unique_ptr<watch::ControlChannel> channel;
  if (c->client) {
    watch::ChannelOptions o;
    o.rank = c->rank;
    o.host = c->host;
    o.pid = c->pid;
    o.comm_number = c->comm_number;
    o.generation = c->generation;
    o.interval = milliseconds(c->config.heartbeat_ms);
    o.misses = c->config.heartbeat_misses;
    o.server_in_rank0 = embedded;
    if (c->config.check_calls && c->recorder) o.calls = &c->recorder->calls();
    channel = std::make_unique<watch::ControlChannel>(*c->client, o);
    CC_RETURN_IF_ERROR(channel->start());
  }
  CC_RETURN_IF_ERROR(watch::CommWatch::create(c, std::move(channel), &c->watch));
  c->watch->set_recorder(c->recorder.get());
  // A split child's calls are compared among its members through the
  // parent's connection, as a line of their own.
  std::shared_ptr<watch::SplitReport> line;
  const cc_comm* parent = split_of.parent;
  if (parent != nullptr && c->config.check_calls && c->recorder && parent->watch &&
      parent->watch->channel() != nullptr) {
    line = std::make_shared<watch::SplitReport>();
    line->line.split = split_of.number;
    line->line.color = split_of.color;
    line->line.rank = c->rank;
    line->line.calls = &c->recorder->calls();
    c->watch->set_split(line);  // before the watchdog sees it
  }
  watch::Watchdog::instance().add(c->watch.get());
  if (line) split_of.parent->watch->add_split(std::move(line));
  return Status::success();
}

void stop_watch(cc_comm* c) {
  if (!c->watch) return;
  watch::Watchdog::instance().remove(c->watch.get());
  c->watch->end_split();  // the parent's tick stops reading this child's calls
}

void discard(cc_comm* c) {
  stop_watch(c);
  if (c->nccl != nullptr || c->nccl_ctl != nullptr) core::abort_nccl(*c);
  core::abort_kept_ctl(*c);
  teardown_fast_allreduce(c);
  free_scratch(c);
  c->client.reset();
  if (c->server) c->server->release(c->job_id, std::min(c->timeout, milliseconds(1000)));
  c->server.reset();
}

}  // namespace cc::comm
