#include "lib/comm/fast_setup.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "common/log.hpp"
#include "common/return_if_error.hpp"
#include "lib/fast/calibrate.hpp"
#include "lib/fast/channel.hpp"
#include "lib/fast/plan_cache.hpp"

namespace cc::comm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration;

// The plan text rank 0 hands the others travels in a buffer of this size.
constexpr size_t kPlanTextBytes = 256;
const std::string kMeasure = "measure";

uint32_t ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<uint32_t>(left.count()) : 0;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return duration<double, std::milli>(b - a).count();
}

Status late(const cc_comm* c) {
  return make_status(CC_ERR_TIMEOUT,
                     c->who() +
                         ": the ranks did not finish setting up cc's all-reduce kernels "
                         "before cc_comm_init's deadline (" +
                         std::to_string(c->timeout.count()) +
                         " ms); a rank stopped during init. Raise CC_TIMEOUT_MS, or set "
                         "CC_FAST_ALLREDUCE=0 to skip the step");
}

Status cuda_failure(const cc_comm* c, const char* what, cudaError_t e) {
  cudaGetLastError();
  return make_status(CC_ERR_CUDA, c->who() + ": setting up cc's all-reduce kernels: " + what +
                                      " failed: " + cudaGetErrorString(e));
}

// Each generation of a recovered communicator (cc_comm_shrink, cc_comm_regrow)
// exchanges and agrees afresh, under keys of its own.
std::string prefix(const cc_comm* c) {
  return "cc/fast-allreduce/" + std::to_string(c->comm_number) +
         (c->generation > 0 ? "." + std::to_string(c->generation) : std::string()) + "/";
}

// Waits for `stream` until the deadline; false when it ran out.
bool wait_stream(cudaStream_t stream, Clock::time_point deadline, cudaError_t* e) {
  while ((*e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// Runs a wait on the rendezvous store (`wait_for(ms)`: a get or wait of at
// most ms) until the deadline. During init (`interrupted` set) it goes in
// slices of 50 ms, asking between them, so news from the rendezvous (a rank
// that failed or died) ends it; the caller's InitListener has the message.
template <class F>
Status store_wait(const cc_comm* c, Clock::time_point deadline, const core::Interrupt& interrupted,
                  F wait_for) {
  for (;;) {
    const uint32_t left = ms_left(deadline);
    const uint32_t slice = interrupted ? std::min<uint32_t>(left, 50) : left;
    Status st = wait_for(std::max<uint32_t>(slice, 1));
    if (st.ok() || st.code != CC_ERR_TIMEOUT) return st;
    if (interrupted && interrupted())
      return make_status(CC_ERR_PEER_FAILED, c->who() +
                                                 ": cc's all-reduce kernel set-up stopped on news "
                                                 "from the rendezvous");
    if (ms_left(deadline) == 0) return late(c);
  }
}

// Runs one NCCL collective on `bytes` of host data through the work
// communicator (a split child has no rendezvous connection): `host` is
// copied in, `enqueue(device_buffer, stream)` runs, `out_bytes` come back.
template <class F>
Status through_nccl(cc_comm* c, const void* host, size_t in_bytes, void* out, size_t out_bytes,
                    const char* what, Clock::time_point deadline, F enqueue) {
  cudaStream_t stream = nullptr;
  void* dev = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMalloc(&dev, std::max(in_bytes, out_bytes));
  if (e == cudaSuccess) e = cudaMemcpyAsync(dev, host, in_bytes, cudaMemcpyHostToDevice, stream);
  ncclResult_t r = ncclSuccess;
  if (e == cudaSuccess) r = enqueue(dev, stream);
  if (e == cudaSuccess && r == ncclSuccess)
    e = cudaMemcpyAsync(out, dev, out_bytes, cudaMemcpyDeviceToHost, stream);
  bool in_time = true;
  if (e == cudaSuccess && r == ncclSuccess) in_time = wait_stream(stream, deadline, &e);
  if (!in_time) {
    core::abort_nccl(*c);  // lets the stream finish before it is destroyed
    cudaStreamSynchronize(stream);
  }
  if (dev != nullptr) cudaFree(dev);
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (!in_time) return late(c);
  if (r != ncclSuccess) return core::nccl_failure(what, *c, r);
  if (e != cudaSuccess) return cuda_failure(c, what, e);
  return Status::success();
}

// Every rank's record, indexed by rank: through the store (each rank sets
// its own, then reads the others), or an NCCL all-gather for a split child.
Status exchange(cc_comm* c, const fast::PeerRecord& mine, Clock::time_point deadline,
                const core::Interrupt& interrupted, std::vector<fast::PeerRecord>* all) {
  const size_t n = static_cast<size_t>(c->nranks);
  all->assign(n, fast::PeerRecord{});
  if (!c->client) {
    return through_nccl(
        c, &mine, sizeof mine, all->data(), n * sizeof mine, "ncclAllGather (cc's kernel set-up)",
        deadline, [&](void* dev, cudaStream_t s) {
          char* base = static_cast<char*>(dev);
          // In place: this rank's record sits at its slot.
          if (c->rank != 0) {
            if (cudaMemcpyAsync(base + static_cast<size_t>(c->rank) * sizeof mine, &mine,
                                sizeof mine, cudaMemcpyHostToDevice, s) != cudaSuccess)
              return ncclUnhandledCudaError;
          }
          return ncclAllGather(base + static_cast<size_t>(c->rank) * sizeof mine, base, sizeof mine,
                               ncclUint8, c->nccl, s);
        });
  }
  const std::string key = prefix(c) + "peer/";
  const auto* bytes = reinterpret_cast<const uint8_t*>(&mine);
  CC_RETURN_IF_ERROR(c->client->set(key + std::to_string(c->rank), {bytes, sizeof mine}));
  for (size_t r = 0; r < n; ++r) {
    std::vector<uint8_t> value;
    CC_RETURN_IF_ERROR(store_wait(c, deadline, interrupted, [&](uint32_t ms) {
      return c->client->get(key + std::to_string(r), &value, ms);
    }));
    if (value.size() != sizeof(fast::PeerRecord))
      return make_status(CC_ERR_MISMATCH,
                         c->who() + ": rank " + std::to_string(r) +
                             " runs another version of cc (its record for cc's all-reduce "
                             "kernels has another size); use one cc on every rank");
    std::memcpy(&(*all)[r], value.data(), value.size());
  }
  return Status::success();
}

// Whether every rank said yes: each rank counts a "no" (if so), then
// itself; the last one in marks the round done. Through the store, or an
// ncclAllReduce (MIN) for a split child.
Status agree(cc_comm* c, const std::string& round, bool* yes, Clock::time_point deadline,
             const core::Interrupt& interrupted = {}) {
  if (!c->client) {
    int value = *yes ? 1 : 0;
    Status st = through_nccl(c, &value, sizeof value, &value, sizeof value,
                             "ncclAllReduce (cc's kernel set-up)", deadline,
                             [&](void* dev, cudaStream_t s) {
                               return ncclAllReduce(dev, dev, 1, ncclInt32, ncclMin, c->nccl, s);
                             });
    *yes = value != 0;
    return st;
  }
  const std::string key = prefix(c) + round;
  int64_t value = 0;
  if (!*yes) CC_RETURN_IF_ERROR(c->client->add(key + "/no", 1, &value));
  CC_RETURN_IF_ERROR(c->client->add(key + "/in", 1, &value));
  if (value == c->nranks) {
    const uint8_t one = 1;
    CC_RETURN_IF_ERROR(c->client->set(key + "/done", {&one, 1}));
  }
  CC_RETURN_IF_ERROR(store_wait(c, deadline, interrupted,
                                [&](uint32_t ms) { return c->client->wait({key + "/done"}, ms); }));
  CC_RETURN_IF_ERROR(c->client->add(key + "/no", 0, &value));
  *yes = value == 0;
  return Status::success();
}

// Rank 0's text for every rank: through the store, or an ncclBroadcast.
Status share_from_rank0(cc_comm* c, const std::string& round, std::string* text,
                        Clock::time_point deadline, const core::Interrupt& interrupted) {
  if (!c->client) {
    char buf[kPlanTextBytes] = {};
    std::memcpy(buf, text->data(), std::min(text->size(), kPlanTextBytes - 1));
    Status st =
        through_nccl(c, buf, sizeof buf, buf, sizeof buf, "ncclBroadcast (cc's kernel set-up)",
                     deadline, [&](void* dev, cudaStream_t s) {
                       return ncclBroadcast(dev, dev, sizeof buf, ncclUint8, 0, c->nccl, s);
                     });
    *text = std::string(buf, strnlen(buf, sizeof buf));
    return st;
  }
  const std::string key = prefix(c) + round;
  if (c->rank == 0) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(text->data());
    return c->client->set(key, {bytes, text->size()});
  }
  std::vector<uint8_t> value;
  CC_RETURN_IF_ERROR(store_wait(c, deadline, interrupted,
                                [&](uint32_t ms) { return c->client->get(key, &value, ms); }));
  text->assign(value.begin(), value.end());
  return Status::success();
}

Status unavailable(const cc_comm* c, int mode, const std::string& why) {
  if (mode != CC_FAST_ALLREDUCE_REQUIRE) {
    log().info("{}: all-reduces go to ncclAllReduce: {}", c->who(), why);
    return Status::success();
  }
  return make_status(CC_ERR_INVALID_USAGE,
                     c->who() +
                         ": cc's all-reduce kernels are required "
                         "(CC_FAST_ALLREDUCE=require or config.fast_allreduce on at least "
                         "one rank), but they cannot be used: " +
                         why +
                         ". Unset CC_FAST_ALLREDUCE (or config.fast_allreduce) on every rank to "
                         "fall back to ncclAllReduce");
}

// Rank 0's choice: the user's plan, the parent's (a split child over as
// many ranks), a cached measurement, or "measure".
std::string plan_source(const cc_comm* c, const std::string& key, std::string* from) {
  const std::string& want = c->config.fast_allreduce_plan;
  if (want != "auto" && want != kMeasure) {
    *from = "set by CC_FAST_ALLREDUCE_PLAN or config.fast_allreduce_plan";
    return want;
  }
  if (want == "auto" && c->parent != nullptr && c->parent->fast != nullptr &&
      c->parent->nranks == c->nranks) {
    *from = "the parent communicator's";
    return fast::format_plan(fast::plan(c->parent->fast));
  }
  std::string text;
  if (want == "auto" && fast::load_plan(c->config.cache_dir, key, &text)) {
    *from = "measured earlier, from " + fast::plan_path(c->config.cache_dir, key);
    return text;
  }
  *from = "measured now";
  return kMeasure;
}

Status make_plan(cc_comm* c, fast::Channel* ch, const std::vector<fast::PeerRecord>& records,
                 Clock::time_point deadline, const core::Interrupt& interrupted) {
  const auto t0 = Clock::now();
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  std::string key, from, text;
  if (c->rank == 0) {
    key = fast::machine_key(c->device, records, nccl_version, CC_VERSION_STRING);
    text = plan_source(c, key, &from);
  }
  CC_RETURN_IF_ERROR(share_from_rank0(c, "plan", &text, deadline, interrupted));
  fast::Plan plan;
  std::string why;
  double measure_ms = 0;
  if (text == kMeasure) {
    fast::Measurement m;
    if (!fast::measure(ch, c->nccl, deadline, &m, &why)) {
      core::abort_nccl(*c);
      return Clock::now() > deadline
                 ? late(c)
                 : make_status(CC_ERR_CUDA, c->who() +
                                                ": measuring cc's all-reduce kernels "
                                                "against ncclAllReduce: " +
                                                why);
    }
    plan = fast::decide_plan(m.samples, fast::capacity(ch), fast::kPlanMargin, m.blocks);
    measure_ms = m.ms;
    if (c->rank == 0) {
      std::string line;
      for (const fast::Sample& s : m.samples) {
        line += " " + fast::format_bytes(s.bytes) + ":";
        for (int a = 0; a < fast::kAlgos; ++a)
          if (s.us[a] >= 0)
            line += fmt::format(" {}={:.2f}", fast::algo_name(static_cast<fast::Algo>(a)), s.us[a]);
      }
      log().debug("{}: all-reduce times (us, slowest rank):{}", c->who(), line);
      if (!fast::store_plan(c->config.cache_dir, key, fast::format_plan(plan), &why))
        log().info("{}: the measured all-reduce plan was not kept: {}", c->who(), why);
    }
  } else if (!fast::parse_plan(text, &plan, &why)) {
    return make_status(CC_ERR_MISMATCH, c->who() + ": rank 0's all-reduce plan '" + text +
                                            "' is not one this cc reads (" + why +
                                            "); use one cc on every rank");
  }
  fast::clamp_plan(&plan, fast::capacity(ch));
  fast::set_plan(ch, plan);
  if (c->rank == 0)
    log().info(
        "{}: all-reduce plan {} ({}; {:.1f} ms{})", c->who(), fast::format_plan(plan), from,
        ms_between(t0, Clock::now()),
        text == kMeasure ? fmt::format(", {:.1f} ms of it measuring", measure_ms) : std::string());
  return Status::success();
}

}  // namespace

Status setup_fast_allreduce(cc_comm* c, Clock::time_point deadline,
                            const core::Interrupt& interrupted) {
  // The plan text is checked here, on every rank before any exchange, so a
  // bad one fails every rank that has it at once.
  const std::string& given = c->config.fast_allreduce_plan;
  if (given != "auto" && given != kMeasure) {
    fast::Plan plan;
    std::string why;
    if (!fast::parse_plan(given, &plan, &why))
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         c->who() + ": " + c->config.fast_allreduce_plan_source + "='" + given +
                             "' is not a plan: " + why +
                             ". Use auto (measured once, then cached), measure, or a plan such "
                             "as ll:1M,oneshot:8M");
  }
  if (c->nranks < 2) return Status::success();
  const int mode = c->config.fast_allreduce;
  const auto t0 = Clock::now();
  fast::PeerRecord mine;
  mine.rank = c->rank;
  fast::Channel* ch = nullptr;
  std::string why;
  if (mode == CC_FAST_ALLREDUCE_OFF) {
    why = "CC_FAST_ALLREDUCE=0";
  } else if (fast::locally_possible(c->nranks, c->device, &why)) {
    ch = fast::prepare(c->rank, c->nranks, c->device, c->host, &mine);
  }
  if (ch == nullptr && mine.why[0] == '\0')
    std::snprintf(mine.why, sizeof mine.why, "%s", why.c_str());
  mine.rank = c->rank;
  mine.required = mode == CC_FAST_ALLREDUCE_REQUIRE ? 1 : 0;

  std::vector<fast::PeerRecord> records;
  if (Status st = exchange(c, mine, deadline, interrupted, &records); !st.ok()) {
    fast::destroy(ch);
    return st;
  }
  // A rank that requires the kernels makes every rank fail without them,
  // so that no rank is left alone in a communicator the others gave up.
  int effective = mode;
  for (const fast::PeerRecord& r : records)
    if (r.required != 0) effective = CC_FAST_ALLREDUCE_REQUIRE;
  for (const fast::PeerRecord& r : records) {
    if (r.able) continue;
    fast::destroy(ch);
    const std::string host(r.host, strnlen(r.host, sizeof r.host));
    const std::string reason(r.why, strnlen(r.why, sizeof r.why));
    return unavailable(c, effective,
                       (r.rank == c->rank ? std::string("on this rank")
                                          : "on rank " + std::to_string(r.rank) +
                                                (host.empty() ? "" : " (host " + host + ")")) +
                           ": " + (reason.empty() ? "it cannot take part" : reason));
  }
  const auto t1 = Clock::now();
  bool made = fast::connect(ch, records, &why);
  if (Status st = agree(c, "made", &made, deadline, interrupted); !st.ok()) {
    fast::destroy(ch);
    return st;
  }
  if (!made) {
    fast::destroy(ch);
    return unavailable(c, effective,
                       why.empty() ? "another rank could not map its peers' buffers" : why);
  }
  const auto t2 = Clock::now();
  if (Status st = make_plan(c, ch, records, deadline, interrupted); !st.ok()) {
    fast::destroy(ch);
    return st;
  }
  c->fast = ch;
  log().debug(
      "{}: cc's all-reduce kernels set up: {:.1f} ms to exchange buffers, {:.1f} ms to "
      "map them, {:.1f} ms for the plan",
      c->who(), ms_between(t0, t1), ms_between(t1, t2), ms_between(t2, Clock::now()));
  return Status::success();
}

bool drain_fast_allreduce(cc_comm* c, Clock::time_point deadline) {
  if (c->fast == nullptr) return true;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (fast::drain(c->fast, std::max<long long>(0, left.count()))) return true;
  log().warn(
      "{}: cc's all-reduce kernel was still waiting for a peer at "
      "cc_comm_destroy's deadline; stopped it and aborting the communicator",
      c->who());
  return false;
}

bool unmap_fast_allreduce_peers(cc_comm* c, Clock::time_point deadline) {
  if (c->fast == nullptr) return true;
  fast::close_peers(c->fast);
  bool yes = true;
  const auto soon = std::min(deadline, Clock::now() + std::chrono::seconds(10));
  if (Status st = agree(c, "unmapped", &yes, soon); !st.ok()) {
    log().warn(
        "{}: not every rank unmapped cc's peer buffers within 10 s ({}); freeing this "
        "rank's anyway and aborting the communicator",
        c->who(), st.message);
    return false;
  }
  return true;
}

void teardown_fast_allreduce(cc_comm* c) {
  if (c->fast == nullptr) return;
  fast::destroy(c->fast);
  c->fast = nullptr;
}

}  // namespace cc::comm
