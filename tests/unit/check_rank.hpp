// One rank of a communicator as the call check sees it, for the unit tests
// (test_call_check.cpp, test_call_ends.cpp): a CallLog the test feeds, and
// the reports it sends (heartbeats, its end, answers to a want), as rank r
// of host "h<r>", pid 10 + r.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/call_desc.hpp"
#include "lib/core/call_log.hpp"
#include "rendezvous/rules/call_check.hpp"

namespace cc::test {

struct CheckRank {
  // `capacity`: the flight recorder's calls (2000 by default).
  CheckRank(int r, int nranks, size_t capacity = 2000) : rank(r), log(nranks, capacity) {}
  void call(const CallDesc& d, int times = 1) {
    for (int i = 0; i < times; ++i) log.record(d, ++op, 0, 0);
  }
  rv::rules::CallReport report(std::vector<CallPoint> points, uint64_t answers = 0) const {
    return {rank, "h" + std::to_string(rank), static_cast<uint32_t>(10 + rank), std::move(points),
            answers};
  }
  // Its next heartbeat's points, compared by `check`.
  std::optional<rv::rules::CallMismatch> beat(rv::rules::CallCheck& check) {
    return check.report(report(log.take_report()));
  }
  std::optional<rv::rules::CallMismatch> end(rv::rules::CallCheck& check) {
    return check.end(report(log.take_report()), log.collectives());
  }
  std::optional<rv::rules::CallMismatch> answer(rv::rules::CallCheck& check,
                                                const rv::rules::CallsWant& w) {
    return check.report(report(log.points_in(w.after, w.through, 256), w.id));
  }
  int rank;
  core::CallLog log;
  uint64_t op = 0;
};

}  // namespace cc::test
