// The call check end to end on etcd (a three-member cluster): the cases of
// tests/rendezvous/call_check_cases.hpp, whose words must be those of cc's
// server character for character; each case also runs on a server of cc's
// in this process, and the two backends' words are compared. Every rank
// hears of a difference at op #50 within 2 s (heartbeats every 100 ms). A
// split child's line (reported on its parent's connection) is compared apart.
#include <catch2/catch.hpp>
#include <string>

#include "tests/etcd/etcd_test.hpp"
#include "tests/rendezvous/call_check_cases.hpp"

namespace {

cc::test::EtcdCluster& three_members() {
  static std::unique_ptr<cc::test::EtcdCluster> c = cc::test::start_cluster(cc::test::members(3));
  return *c;
}

}  // namespace

TEST_CASE(
    "etcd: a rank that differs at op #50 is named to every rank within 2 s, as on cc's server") {
  auto server = cc::test::start_local_server();
  for (const auto& c : cc::test::divergence_cases()) {
    INFO("case " << c.name);
    const std::string job = std::string("calls-") + c.name;
    const auto on_etcd = cc::test::run_divergence(three_members().address(), 0, job, c);
    const auto on_server = cc::test::run_divergence("127.0.0.1", server->port(), job, c);
    for (size_t r = 0; r < on_etcd.size(); ++r) {
      INFO("rank " << r);
      CHECK(on_etcd[r] == cc::test::divergence_words(c));
      CHECK(on_etcd[r] == on_server.at(r));
    }
  }
}

TEST_CASE("etcd: two communicators interleaved in another order on each rank agree") {
  cc::test::run_legal(three_members().address(), 0, "calls-legal");
}

TEST_CASE("etcd: a split child's calls are compared on their own, apart from its parent's") {
  for (bool child_differs : {true, false}) {
    INFO((child_differs ? "the child differs" : "the parent differs"));
    for (const std::string& w : cc::test::run_split(
             three_members().address(), 0,
             child_differs ? "calls-split-child" : "calls-split-parent", child_differs))
      CHECK(w == cc::test::split_words(child_differs));
  }
}
