// One rank's rendezvous on a thread of its own, for the tests where threads
// play every rank; rank 0 makes kId as the job's unique id.
#pragma once

#include <cstdint>
#include <future>
#include <vector>

#include "lib/comm/rendezvous_join.hpp"

namespace cc::test {

inline const std::vector<uint8_t> kId(128, 0xab);

// What one rank's rendezvous came to.
struct RankOutcome {
  Status status;
  comm::RendezvousResult result;
};

// Runs join(request, make_id, &result) on a thread of its own.
template <class Request>
std::future<RankOutcome> start_rank_thread(Status (*join)(Request, const comm::MakeId&,
                                                          comm::RendezvousResult*),
                                           Request request) {
  return std::async(std::launch::async, [join, r = std::move(request)]() mutable {
    RankOutcome o;
    o.status = join(
        std::move(r),
        [](std::vector<uint8_t>* id) {
          *id = kId;
          return Status::success();
        },
        &o.result);
    return o;
  });
}

}  // namespace cc::test
