#include "rendezvous/store.hpp"

#include <string>

#include "common/printable.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::rv {

Status check_job_id(std::string_view job_id, std::string_view named) {
  const Limits limits;
  if (job_id.size() <= limits.max_key) return Status::success();
  return make_status(CC_ERR_INVALID_ARGUMENT,
                     std::string(named) + " '" + shortened(job_id) + "' is over the limit of " +
                         std::to_string(limits.max_key) + " bytes for a job id: use a shorter one");
}

}  // namespace cc::rv
