// A split child's calls compared as it ends, on cc's server: three
// call_check_member processes (no NCCL) split communicator 1 into one child
// (ranks in reverse order) and end the child as cc_comm_destroy does, its
// CallsEnd on the parent's connection marked with the split. A child whose
// kind differs at op #50, in its last ten calls (60 calls) or in the middle
// (200 calls, found in the ranks' flight recorders), is named to every
// rank at its end, in the child's rank numbers; a child whose calls agree
// ends without a word, though its parent's differ; a child rank that dies
// with its parent membership is a death, not a mismatch, and not waited for.
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

// Every rank ends the child, job ranks 0 and 1 (child ranks 2 and 1) first
// so that they are the two compared; what each was told.
std::vector<std::string> end_children(CallCheckMembers& ms) {
  ms[0]->say("end-split");
  ms[1]->say("end-split");
  std::this_thread::sleep_for(milliseconds(300));
  ms[2]->say("end-split");
  std::vector<std::string> told;
  for (auto& m : ms) told.push_back(next_line(*m, "END", milliseconds(15000)));
  cc::test::leave_all(ms);
  return told;
}

}  // namespace

TEST_CASE("cc's server: a split child whose ranks differ is named as it ends, in its numbers") {
  auto server = cc::test::start_local_server();
  for (int calls : {60, 200}) {
    INFO(calls << " calls");
    CallCheckMembers ms = start(server->port(), "split-ends-" + std::to_string(calls),
                                "split-child", calls);
    for (const std::string& told : end_children(ms))
      CHECK(told == "END MISMATCH " + cc::test::split_words(true));
  }
}

TEST_CASE("cc's server: a split child whose ranks agree ends without a word") {
  auto server = cc::test::start_local_server();
  // The parent's calls differ; the child's, compared alone, do not.
  CallCheckMembers ms = start(server->port(), "split-ends-agree", "split-parent", 200);
  for (const std::string& told : end_children(ms)) CHECK(told == "END OK");
}

TEST_CASE("cc's server: a split child's rank that dies is a death, not a mismatch") {
  auto server = cc::test::start_local_server();
  CallCheckMembers ms = start(server->port(), "split-ends-death", "split-none", 60);
  for (auto& m : ms) m->say("go");
  // Job rank 2 (the child's rank 0) reported its child's line: the server
  // knows which parent rank it is.
  REQUIRE(next_line(*ms[2], "REPORTED", milliseconds(10000)) == "REPORTED 1.s1");
  ms[0]->say("end-split");
  ms[1]->say("end-split");
  ms[2]->say("die");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(next_line(*ms[r], "END", milliseconds(15000)) == "END OK");
  }
}
