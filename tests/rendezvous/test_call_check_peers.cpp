// The call check end to end on cc's server: ranks as call_check_member
// processes (the control channel, the watchdog and the rendezvous client, no
// NCCL) whose heartbeats carry their calls' points. A rank that differs at
// op #50 in kind, count, datatype, op, root, a skipped or an extra call is
// named to every rank within 2 s, in the words of call_check_cases.hpp; two
// communicators interleaved differently on each rank are not flagged.
#include <catch2/catch.hpp>
#include <string>

#include "tests/rendezvous/call_check_cases.hpp"

TEST_CASE("cc's server: a rank that differs at op #50 is named to every rank within 2 s") {
  auto server = cc::test::start_local_server();
  for (const auto& c : cc::test::divergence_cases()) {
    INFO("case " << c.name);
    for (const std::string& w : cc::test::run_divergence("127.0.0.1", server->port(),
                                                         std::string("calls-") + c.name, c))
      CHECK(w == cc::test::divergence_words(c));
  }
}

TEST_CASE("cc's server: two communicators interleaved in another order on each rank agree") {
  auto server = cc::test::start_local_server();
  cc::test::run_legal("127.0.0.1", server->port(), "calls-legal");
}
