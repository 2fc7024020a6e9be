// The call check end to end on cc's server: ranks as call_check_member
// processes (the control channel, the watchdog and the rendezvous client, no
// NCCL) whose heartbeats carry their calls' points. A rank that differs at
// op #50 in kind, count, datatype, op, root, a skipped or an extra call is
// named to every rank within 2 s, in the message of call_check_cases.hpp; two
// communicators interleaved differently on each rank are not flagged. A
// split child's calls are compared among its members alone: a difference on
// it does not flag the parent, nor one on the parent the child.
#include <catch2/catch.hpp>
#include <string>

#include "tests/rendezvous/call_check_cases.hpp"

TEST_CASE("cc's server: a rank that differs at op #50 is named to every rank within 2 s") {
  auto server = cc::test::start_local_server();
  for (const auto& c : cc::test::divergence_cases()) {
    INFO("case " << c.name);
    for (const std::string& w :
         cc::test::run_divergence("127.0.0.1", server->port(), std::string("calls-") + c.name, c))
      CHECK(w == cc::test::divergence_words(c));
  }
}

TEST_CASE("cc's server: two communicators interleaved in another order on each rank agree") {
  auto server = cc::test::start_local_server();
  cc::test::run_legal("127.0.0.1", server->port(), "calls-legal");
}

TEST_CASE("cc's server: a split child's calls are compared on their own, apart from its parent's") {
  auto server = cc::test::start_local_server();
  for (bool child_differs : {true, false}) {
    INFO((child_differs ? "the child differs" : "the parent differs"));
    for (const std::string& w : cc::test::run_split(
             "127.0.0.1", server->port(),
             child_differs ? "calls-split-child" : "calls-split-parent", child_differs))
      CHECK(w == cc::test::split_words(child_differs));
  }
}
