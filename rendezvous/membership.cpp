// What a backend that lacks a part of the membership says.
#include "rendezvous/membership.hpp"

namespace cc::rv {

Status Membership::recover(const Recover& request, const MakeId& make_id, Joined* out) {
  (void)request;
  (void)make_id;
  (void)out;
  return make_status(CC_ERR_INVALID_USAGE,
                     "the rendezvous at " + endpoint() +
                         " cannot recover a communicator (cc_comm_shrink, cc_comm_regrow): run "
                         "the job with cc's own rendezvous server (cc-run, cc-rendezvous)");
}

Status Membership::progress_in(uint32_t comm_number, uint32_t generation, int32_t rank,
                               Progress* out, std::chrono::milliseconds timeout) {
  if (generation == 0) return progress(comm_number, rank, out, timeout);
  return make_status(CC_ERR_INVALID_USAGE, "the rendezvous at " + endpoint() +
                                               " knows no generation of a recovered communicator");
}

Status Membership::status(const StatusQuery&, StatusReport*, std::chrono::milliseconds) {
  return make_status(CC_ERR_INVALID_USAGE,
                     "this rendezvous backend has no status report; ask cc's own server "
                     "(cc-rendezvous, or rank 0's embedded server)");
}

}  // namespace cc::rv
