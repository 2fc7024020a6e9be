// The members of the call-ends tests (test_call_ends_peers.cpp,
// test_split_ends_peers.cpp): three call_check_member processes with no
// heartbeat, and their ends, ranks 0 and 1 first so that they are the two
// compared (as call_check_cases.hpp starts rank 2 late).
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/rendezvous/call_check_cases.hpp"

namespace cc::test {

// Three members of `job` on cc's server at `port`, each making `calls`
// calls of case `which`, joined.
inline CallCheckMembers start_call_ends_job(int port, const std::string& job,
                                            const std::string& which, int calls) {
  CallCheckMembers ms;
  for (int r = 0; r < 3; ++r)
    ms.push_back(std::make_unique<ChildProcess>(member_args(
        "CALL_CHECK_MEMBER", port, job, r, 3, {which, "--calls", std::to_string(calls)})));
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    REQUIRE(next_line(*ms[r], "READY", std::chrono::milliseconds(20000)) ==
            "READY " + std::to_string(r));
  }
  return ms;
}

// Every member is told `command` ("end", "end-split"), rank 2 300 ms after
// the others; the END line each prints, in rank order.
inline std::vector<std::string> end_all(CallCheckMembers& ms, const std::string& command) {
  ms[0]->say(command);
  ms[1]->say(command);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ms[2]->say(command);
  std::vector<std::string> told;
  for (auto& m : ms) told.push_back(next_line(*m, "END", std::chrono::milliseconds(15000)));
  leave_all(ms);
  return told;
}

// Ranks 0 and 1 are told `command` and rank 2 dies: a death, not a
// mismatch, so both end with "END OK".
inline void check_death_is_no_mismatch(CallCheckMembers& ms, const std::string& command) {
  ms[0]->say(command);
  ms[1]->say(command);
  ms[2]->say("die");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(next_line(*ms[r], "END", std::chrono::milliseconds(15000)) == "END OK");
  }
}

}  // namespace cc::test
