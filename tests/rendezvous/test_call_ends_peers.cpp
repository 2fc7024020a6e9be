// The ranks' calls compared as their communicator ends, on cc's server:
// three call_check_member processes (no NCCL) record their calls with no
// heartbeat, then end as cc_comm_destroy does. A rank that differs at op #50
// in kind, count, datatype, op, root, a skipped or an extra call, in its
// last ten calls (60 calls) or in the middle (200 calls, found in the
// ranks' flight recorders), is named to every rank at its end, in the same
// words as a difference found while the ranks run; ranks that agree are
// told so; a rank that dies before it ends is a death, not a mismatch.
#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "tests/rendezvous/call_check_cases.hpp"

namespace {

using cc::test::CallCheckMembers;
using cc::test::next_line;
using std::chrono::milliseconds;

CallCheckMembers start(int port, const std::string& job, const std::string& which, int calls) {
  CallCheckMembers ms;
  for (int r = 0; r < 3; ++r)
    ms.push_back(std::make_unique<cc::test::ChildProcess>(
        cc::test::member_args("CALL_CHECK_MEMBER", port, job, r, 3,
                              {which, "--calls", std::to_string(calls)})));
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    REQUIRE(next_line(*ms[r], "READY", milliseconds(20000)) == "READY " + std::to_string(r));
  }
  return ms;
}

// Every rank ends, ranks 0 and 1 first so that they are the two compared
// (as call_check_cases.hpp starts rank 2 late); what each was told.
std::vector<std::string> end_all(CallCheckMembers& ms) {
  ms[0]->say("end");
  ms[1]->say("end");
  std::this_thread::sleep_for(milliseconds(300));
  ms[2]->say("end");
  std::vector<std::string> told;
  for (auto& m : ms) told.push_back(next_line(*m, "END", milliseconds(15000)));
  cc::test::leave_all(ms);
  return told;
}

}  // namespace

TEST_CASE("cc's server: ranks that differ are named as they end, at the op where they part") {
  auto server = cc::test::start_local_server();
  for (int calls : {60, 200}) {
    for (const auto& c : cc::test::divergence_cases()) {
      INFO("case " << c.name << ", " << calls << " calls");
      CallCheckMembers ms =
          start(server->port(), "ends-" + std::string(c.name) + std::to_string(calls), c.name, calls);
      for (const std::string& told : end_all(ms))
        CHECK(told == "END MISMATCH " + cc::test::divergence_words(c));
    }
  }
}

TEST_CASE("cc's server: ranks that make the same calls end without a word") {
  auto server = cc::test::start_local_server();
  CallCheckMembers ms = start(server->port(), "ends-none", "none", 200);
  for (const std::string& told : end_all(ms)) CHECK(told == "END OK");
}

TEST_CASE("cc's server: a rank that dies before it ends is a death, not a mismatch") {
  auto server = cc::test::start_local_server();
  CallCheckMembers ms = start(server->port(), "ends-death", "none", 200);
  ms[0]->say("end");
  ms[1]->say("end");
  ms[2]->say("die");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(next_line(*ms[r], "END", milliseconds(15000)) == "END OK");
  }
}
