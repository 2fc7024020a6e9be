#include "lib/comm/fast_setup.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <cuda_runtime_api.h>

#include "common/log.hpp"

namespace cc::comm {
namespace {

using Clock = std::chrono::steady_clock;

uint32_t ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<uint32_t>(left.count()) : 0;
}

Status late(const cc_comm* c) {
  return make_status(CC_ERR_TIMEOUT,
                     c->who() +
                         ": the ranks did not agree on the small all-reduce path before "
                         "cc_comm_init's deadline (" +
                         std::to_string(c->timeout.count()) +
                         " ms); a rank stopped during init. Raise CC_TIMEOUT_MS, or set "
                         "CC_FAST_ALLREDUCE=0 to skip the step");
}

// Waits for `stream` until the deadline; false when it ran out.
bool wait_stream(cudaStream_t stream, Clock::time_point deadline, cudaError_t* e) {
  while ((*e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// Whether every rank said yes, through the rendezvous store: each rank counts
// a "no" (if so), then itself; the last one in marks the round done. Used at
// init, where the connection is idle and an NCCL collective would set up
// NCCL's connections inside cc_comm_init.
Status agree_by_store(cc_comm* c, const std::string& round, bool* yes, Clock::time_point deadline) {
  const std::string prefix = "cc/fast-allreduce/" + std::to_string(c->generation) + "/" + round;
  int64_t value = 0;
  if (!*yes)
    if (Status st = c->client->add(prefix + "/no", 1, &value); !st.ok()) return st;
  if (Status st = c->client->add(prefix + "/in", 1, &value); !st.ok()) return st;
  if (value == c->nranks) {
    const uint8_t one = 1;
    if (Status st = c->client->set(prefix + "/done", {&one, 1}); !st.ok()) return st;
  }
  if (Status st = c->client->wait({prefix + "/done"}, ms_left(deadline)); !st.ok())
    return st.code == CC_ERR_TIMEOUT ? late(c) : st;
  if (Status st = c->client->add(prefix + "/no", 0, &value); !st.ok()) return st;
  *yes = value == 0;
  return Status::success();
}

// The same through ncclAllReduce (MIN) on the work communicator, for a split
// child, which has no rendezvous connection of its own.
Status agree_by_nccl(cc_comm* c, bool* yes, Clock::time_point deadline) {
  int value = *yes ? 1 : 0;
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(c->scratch, &value, sizeof value, cudaMemcpyHostToDevice, stream);
  ncclResult_t r = ncclSuccess;
  if (e == cudaSuccess)
    r = ncclAllReduce(c->scratch, c->scratch, 1, ncclInt32, ncclMin, c->nccl, stream);
  if (e == cudaSuccess && r == ncclSuccess)
    e = cudaMemcpyAsync(&value, c->scratch, sizeof value, cudaMemcpyDeviceToHost, stream);
  bool in_time = true;
  if (e == cudaSuccess && r == ncclSuccess) in_time = wait_stream(stream, deadline, &e);
  if (!in_time) {
    core::abort_nccl(*c);  // lets the stream finish before it is destroyed
    cudaStreamSynchronize(stream);
  }
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (!in_time) return late(c);
  if (r != ncclSuccess) return core::nccl_failure("ncclAllReduce (init)", *c, r);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return make_status(
        CC_ERR_CUDA, c->who() + ": setting up the small all-reduce path: " + cudaGetErrorString(e));
  }
  *yes = value != 0;
  return Status::success();
}

Status agree(cc_comm* c, const std::string& round, bool* yes, Clock::time_point deadline) {
  return c->client ? agree_by_store(c, round, yes, deadline) : agree_by_nccl(c, yes, deadline);
}

// Zeroes this rank's inbox and waits for it, so that once all ranks agreed
// afterwards no stale line can pass for a new one.
Status clear_inbox(cc_comm* c, fast::Channel* ch, Clock::time_point deadline) {
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = fast::clear_inbox(ch, stream);
  const bool in_time = e != cudaSuccess || wait_stream(stream, deadline, &e);
  if (stream != nullptr) {
    if (!in_time) cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  if (!in_time) return late(c);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return make_status(
        CC_ERR_CUDA, c->who() + ": clearing the small all-reduce inbox: " + cudaGetErrorString(e));
  }
  return Status::success();
}

Status unavailable(const cc_comm* c, int mode, const std::string& why) {
  if (mode != CC_FAST_ALLREDUCE_REQUIRE) {
    log().info("{}: small all-reduces go to ncclAllReduce: {}", c->who(), why);
    return Status::success();
  }
  return make_status(CC_ERR_INVALID_USAGE,
                     c->who() +
                         ": cc's small all-reduce kernel is required "
                         "(CC_FAST_ALLREDUCE=require or config.fast_allreduce), but it "
                         "cannot be used: " +
                         why +
                         ". Unset CC_FAST_ALLREDUCE (or config.fast_allreduce) to fall back to "
                         "ncclAllReduce");
}

}  // namespace

Status setup_fast_allreduce(cc_comm* c, Clock::time_point deadline) {
  if (c->nranks < 2) return Status::success();
  const int mode = c->config.fast_allreduce;
  std::string why;
  bool able = false;
  if (mode == CC_FAST_ALLREDUCE_OFF)
    why = "CC_FAST_ALLREDUCE=0";
  else
    able = fast::locally_possible(c->nranks, c->device, &why);
  const auto t0 = Clock::now();
  if (Status st = agree(c, "able", &able, deadline); !st.ok()) return st;
  if (!able) return unavailable(c, mode, why.empty() ? "another rank cannot use it" : why);
  const auto t1 = Clock::now();
  fast::Channel* ch = fast::create(c->nccl, c->device, &why);
  bool made = ch != nullptr;
  if (made) {
    if (Status cleared = clear_inbox(c, ch, deadline); !cleared.ok()) {
      why = cleared.message;
      made = false;
    }
  }
  Status st;
  const auto t2 = Clock::now();
  if (Status agreed = agree(c, "made", &made, deadline); !agreed.ok()) st = agreed;
  if (!st.ok()) {
    fast::destroy(ch);
    return st;
  }
  if (!made) {
    fast::destroy(ch);
    return unavailable(c, mode, why.empty() ? "another rank could not set it up" : why);
  }
  c->fast = ch;
  using std::chrono::duration;
  log().debug(
      "{}: all-reduces up to {} bytes use cc's kernel (NCCL device API); set-up took "
      "{:.1f} ms to agree, {:.1f} ms to make, {:.1f} ms to agree again",
      c->who(), fast::kMaxBytes, duration<double, std::milli>(t1 - t0).count(),
      duration<double, std::milli>(t2 - t1).count(),
      duration<double, std::milli>(Clock::now() - t2).count());
  return Status::success();
}

bool drain_fast_allreduce(cc_comm* c, Clock::time_point deadline) {
  if (c->fast == nullptr) return true;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (fast::drain(c->fast, std::max<long long>(0, left.count()))) return true;
  log().warn(
      "{}: cc's small all-reduce kernel was still waiting for a peer at "
      "cc_comm_destroy's deadline; stopped it and aborting the communicator",
      c->who());
  return false;
}

void teardown_fast_allreduce(cc_comm* c) {
  if (c->fast == nullptr) return;
  fast::destroy(c->fast);
  c->fast = nullptr;
}

}  // namespace cc::comm
