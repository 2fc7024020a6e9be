// The ranks' calls compared as their communicator ends, on cc's server:
// three call_check_member processes (no NCCL) record their calls with no
// heartbeat, then end as cc_comm_destroy does. A rank that differs at op #50
// in kind, count, datatype, op, root, a skipped or an extra call, in its
// last ten calls (60 calls) or in the middle (200 calls, found in the
// ranks' flight recorders), is named to every rank at its end, with the same
// message as a difference found while the ranks run; ranks that agree are
// told so; a rank that dies before it ends is a death, not a mismatch.
#include <catch2/catch.hpp>
#include <string>

#include "tests/rendezvous/call_check_cases.hpp"
#include "tests/rendezvous/call_ends_cases.hpp"

TEST_CASE("cc's server: ranks that differ are named as they end, at the op where they part") {
  auto server = cc::test::start_local_server();
  for (int calls : {60, 200}) {
    for (const auto& c : cc::test::divergence_cases()) {
      INFO("case " << c.name << ", " << calls << " calls");
      cc::test::CallCheckMembers ms = cc::test::start_call_ends_job(
          server->port(), "ends-" + std::string(c.name) + std::to_string(calls), c.name, calls);
      for (const std::string& told : cc::test::end_all(ms, "end"))
        CHECK(told == "END MISMATCH " + cc::test::divergence_words(c));
    }
  }
}

TEST_CASE("cc's server: ranks that make the same calls end without a word") {
  auto server = cc::test::start_local_server();
  cc::test::CallCheckMembers ms =
      cc::test::start_call_ends_job(server->port(), "ends-none", "none", 200);
  for (const std::string& told : cc::test::end_all(ms, "end")) CHECK(told == "END OK");
}

TEST_CASE("cc's server: a rank that dies before it ends is a death, not a mismatch") {
  auto server = cc::test::start_local_server();
  cc::test::CallCheckMembers ms =
      cc::test::start_call_ends_job(server->port(), "ends-death", "none", 200);
  cc::test::check_death_is_no_mismatch(ms, "end");
}
