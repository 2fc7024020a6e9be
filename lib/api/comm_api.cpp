// cc_comm_*: a communicator's life, as the C API offers it. Each entry point
// checks its arguments and hands over to lib/comm.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "common/last_error.hpp"
#include "common/return_if_error.hpp"
#include "common/settings.hpp"
#include "lib/comm/comm.hpp"
#include "lib/fast/channel.hpp"
#include "lib/launch/env.hpp"

using cc::fail;
using cc::Status;
using cc::succeed;

namespace {

// cc_comm_rank, _size, _device, _timeout: one field of a live handle.
template <class T>
cc_result_t read_field(const char* call, cc_comm_t c, const char* out_name, int* out, T value) {
  if (Status st = cc::comm::check_handle(call, c); !st.ok()) return fail(st);
  if (out == nullptr)
    return fail(CC_ERR_INVALID_ARGUMENT, std::string(call) + ": " + out_name + " is NULL");
  *out = value(c);
  return succeed();
}

// cc_comm_split, _shrink, _regrow: a live handle, and somewhere to put the
// new one (cleared first, so that it is NULL on every failure).
Status check_newcomm(const char* call, cc_comm_t comm, cc_comm_t* newcomm) {
  if (newcomm != nullptr) *newcomm = nullptr;
  CC_RETURN_IF_ERROR(cc::comm::check_handle(call, comm));
  if (newcomm == nullptr)
    return cc::make_status(CC_ERR_INVALID_ARGUMENT,
                           std::string(call) + " on " + comm->who() +
                               ": newcomm is NULL; pass the address of a cc_comm_t");
  return Status::success();
}

}  // namespace

extern "C" {

CC_API cc_result_t cc_comm_init(cc_comm_t* comm, int rank, int nranks, const char* master_addr,
                                int master_port, const cc_config_t* config) {
  CC_API_GUARD_BEGIN
  if (comm != nullptr) *comm = nullptr;
  cc::rv::factory::Address address;
  if (Status st =
          cc::comm::check_init_args(comm, rank, nranks, master_addr, master_port, &address);
      !st.ok())
    return fail(st);
  int local_rank = -1;
  if (Status st = cc::comm::local_rank_from_env(&local_rank); !st.ok()) return fail(st);
  return fail(cc::comm::init(comm, rank, nranks, address, config, local_rank));
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_init_from_env(cc_comm_t* comm, const cc_config_t* config) {
  CC_API_GUARD_BEGIN
  if (comm == nullptr)
    return fail(CC_ERR_INVALID_ARGUMENT,
                "cc_comm_init_from_env: comm is NULL; pass the address of a cc_comm_t");
  *comm = nullptr;
  cc::launch::LaunchInfo info;
  if (Status st = cc::launch::read_launch_info(cc::settings::process_env(), &info); !st.ok())
    return fail(st.code, "cc_comm_init_from_env: " + st.message);
  if (Status st = cc::comm::check_rank_args(comm, info.rank, info.world_size); !st.ok())
    return fail(st);
  return fail(
      cc::comm::init(comm, info.rank, info.world_size, info.address, config, info.local_rank));
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_split(cc_comm_t comm, int color, int key, cc_comm_t* newcomm,
                                 const cc_config_t* config) {
  CC_API_GUARD_BEGIN
  if (Status st = check_newcomm("cc_comm_split", comm, newcomm); !st.ok()) return fail(st);
  if (!cc::core::usable(*comm)) return fail(cc::core::state_status("cc_comm_split", *comm));
  return fail(cc::comm::split(comm, color, key, newcomm, config));
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_destroy(cc_comm_t comm) {
  CC_API_GUARD_BEGIN
  if (comm == nullptr) return succeed();
  if (Status st = cc::comm::check_handle("cc_comm_destroy", comm); !st.ok()) return fail(st);
  if (Status st = cc::comm::graphs_released(comm); !st.ok()) return fail(st);
  if (Status st = cc::comm::destroy(std::unique_ptr<cc_comm>(comm)); !st.ok()) return fail(st);
  return succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_abort(cc_comm_t comm) {
  CC_API_GUARD_BEGIN
  if (Status st = cc::comm::check_handle("cc_comm_abort", comm); !st.ok()) return fail(st);
  cc::comm::abort(comm);
  return succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_rank(cc_comm_t comm, int* rank) {
  CC_API_GUARD_BEGIN
  return read_field("cc_comm_rank", comm, "rank", rank, [](cc_comm_t c) { return c->rank; });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_size(cc_comm_t comm, int* nranks) {
  CC_API_GUARD_BEGIN
  return read_field("cc_comm_size", comm, "nranks", nranks, [](cc_comm_t c) { return c->nranks; });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_device(cc_comm_t comm, int* cuda_device) {
  CC_API_GUARD_BEGIN
  return read_field("cc_comm_device", comm, "cuda_device", cuda_device,
                    [](cc_comm_t c) { return c->device; });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_timeout(cc_comm_t comm, int* timeout_ms) {
  CC_API_GUARD_BEGIN
  return read_field("cc_comm_timeout", comm, "timeout_ms", timeout_ms,
                    [](cc_comm_t c) { return static_cast<int>(c->timeout.count()); });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_allreduce_plan(cc_comm_t comm, char* plan, size_t cap) {
  CC_API_GUARD_BEGIN
  if (Status st = cc::comm::check_handle("cc_comm_allreduce_plan", comm); !st.ok()) return fail(st);
  const std::string text =
      comm->fast != nullptr ? cc::fast::format_plan(cc::fast::plan(comm->fast)) : "nccl";
  if (plan == nullptr || cap <= text.size())
    return fail(CC_ERR_INVALID_ARGUMENT,
                "cc_comm_allreduce_plan: " +
                    (plan == nullptr ? std::string("plan is NULL")
                                     : "cap " + std::to_string(cap) + " is too small for the " +
                                           std::to_string(text.size() + 1) + " bytes of the plan") +
                    "; pass a buffer of 128 bytes");
  std::memcpy(plan, text.c_str(), text.size() + 1);
  return succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_shrink(cc_comm_t comm, int timeout_ms, cc_comm_t* newcomm) {
  CC_API_GUARD_BEGIN
  if (Status st = check_newcomm("cc_comm_shrink", comm, newcomm); !st.ok()) return fail(st);
  return fail(cc::comm::shrink(comm, timeout_ms, newcomm));
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_regrow(cc_comm_t comm, int nranks, int timeout_ms, cc_comm_t* newcomm) {
  CC_API_GUARD_BEGIN
  if (Status st = check_newcomm("cc_comm_regrow", comm, newcomm); !st.ok()) return fail(st);
  if (nranks < 1)
    return fail(CC_ERR_INVALID_ARGUMENT, "cc_comm_regrow on " + comm->who() + ": nranks " +
                                             std::to_string(nranks) +
                                             " must be at least 1 (the job's size to grow back to)");
  return fail(cc::comm::regrow(comm, nranks, timeout_ms, newcomm));
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_generation(cc_comm_t comm, int* generation) {
  CC_API_GUARD_BEGIN
  return read_field("cc_comm_generation", comm, "generation", generation,
                    [](cc_comm_t c) { return static_cast<int>(c->generation); });
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_check(cc_comm_t comm) {
  CC_API_GUARD_BEGIN
  if (Status st = cc::comm::check_handle("cc_comm_check", comm); !st.ok()) return fail(st);
  if (!cc::core::usable(*comm) || comm->abort_requested.load())
    return fail(cc::core::state_status("cc_comm_check", *comm));
  if (comm->parent != nullptr && !cc::core::usable(*comm->parent))  // before the watchdog's tick
    return fail(cc::core::state_status("cc_comm_check (its parent communicator)", *comm->parent));
  return succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_failed_ranks(cc_comm_t comm, int* ranks, int cap, int* count) {
  CC_API_GUARD_BEGIN
  if (Status st = cc::comm::check_handle("cc_comm_failed_ranks", comm); !st.ok()) return fail(st);
  const std::string who = "cc_comm_failed_ranks on " + comm->who();
  if (count == nullptr) return fail(CC_ERR_INVALID_ARGUMENT, who + ": count is NULL");
  if (cap < 0)
    return fail(CC_ERR_INVALID_ARGUMENT,
                who + ": cap " + std::to_string(cap) + " is negative; pass the size of ranks[]");
  if (ranks == nullptr && cap > 0)
    return fail(CC_ERR_INVALID_ARGUMENT,
                who + ": ranks is NULL with cap " + std::to_string(cap) + "; pass cap 0 to ask "
                      "only for the count");
  const std::vector<int> failed = cc::comm::failed_ranks(comm);
  *count = static_cast<int>(failed.size());
  for (size_t i = 0; i < failed.size() && i < static_cast<size_t>(cap); ++i) ranks[i] = failed[i];
  return succeed();
  CC_API_GUARD_END
}

CC_API cc_result_t cc_comm_dump_trace(cc_comm_t comm, const char* dir) {
  CC_API_GUARD_BEGIN
  if (Status st = cc::comm::check_handle("cc_comm_dump_trace", comm); !st.ok()) return fail(st);
  const std::string who = "cc_comm_dump_trace on " + comm->who();
  const std::string target = dir != nullptr ? dir : comm->config.trace_dir;
  if (target.empty())
    return fail(CC_ERR_INVALID_ARGUMENT,
                who + ": dir is NULL and CC_TRACE_DIR is not set; pass a directory or set it");
  if (!comm->recorder)
    return fail(CC_ERR_INVALID_USAGE, who + ": this communicator keeps no flight recorder "
                                            "(CC_CHECK_CALLS=0 with CC_TRACE_BUFFER=0)");
  std::string path;
  const uint64_t completed = comm->watch ? comm->watch->completed() : 0;
  if (Status st = comm->recorder->write(target, "cc_comm_dump_trace", completed, &path); !st.ok())
    return fail(cc::make_status(st.code, who + ": " + st.message));
  return succeed();
  CC_API_GUARD_END
}

}  // extern "C"
