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

#include "tests/rendezvous/call_check_cases.hpp"
#include "tests/rendezvous/call_ends_cases.hpp"

using cc::test::CallCheckMembers;
using cc::test::end_all;
using cc::test::next_line;
using cc::test::start_call_ends_job;
using std::chrono::milliseconds;

TEST_CASE("cc's server: a split child whose ranks differ is named as it ends, in its numbers") {
  auto server = cc::test::start_local_server();
  for (int calls : {60, 200}) {
    INFO(calls << " calls");
    CallCheckMembers ms = start_call_ends_job(server->port(), "split-ends-" + std::to_string(calls),
                                              "split-child", calls);
    for (const std::string& told : end_all(ms, "end-split"))
      CHECK(told == "END MISMATCH " + cc::test::split_words(true));
  }
}

TEST_CASE("cc's server: a split child whose ranks agree ends without a word") {
  auto server = cc::test::start_local_server();
  // The parent's calls differ; the child's, compared alone, do not.
  CallCheckMembers ms =
      start_call_ends_job(server->port(), "split-ends-agree", "split-parent", 200);
  for (const std::string& told : end_all(ms, "end-split")) CHECK(told == "END OK");
}

TEST_CASE("cc's server: a split child's rank that dies is a death, not a mismatch") {
  auto server = cc::test::start_local_server();
  CallCheckMembers ms = start_call_ends_job(server->port(), "split-ends-death", "split-none", 60);
  for (auto& m : ms) m->say("go");
  // Job rank 2 (the child's rank 0) reported its child's line: the server
  // knows which parent rank it is.
  REQUIRE(next_line(*ms[2], "REPORTED", milliseconds(10000)) == "REPORTED 1.s1");
  cc::test::check_death_is_no_mismatch(ms, "end-split");
}
