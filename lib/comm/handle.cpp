// Handles: checking one at a call's entry, and burying a destroyed one.
#include <memory>
#include <mutex>
#include <vector>

#include "lib/comm/comm.hpp"
#include "lib/comm/handle.hpp"

namespace cc::comm {

Status check_handle(const char* call, const cc_comm* comm) {
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

}  // namespace cc::comm
