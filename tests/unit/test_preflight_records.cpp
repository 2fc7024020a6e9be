// What the etcd backend's reachability test keeps in etcd
// (rendezvous/etcd/preflight_records.*, its keys in keys.hpp): each record
// read back as written, values that are not ours refused, and the keys
// under the generation with the ranks read back from them.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "rendezvous/etcd/keys.hpp"
#include "rendezvous/etcd/preflight_records.hpp"

using namespace cc::rv;
using namespace cc::rv::etcd;

TEST_CASE("preflight records: an endpoint reads back as written") {
  PreflightReadyRecord r;
  r.rank = 3;
  r.host = "node-d";
  r.pid = 4242;
  r.ready.enabled = false;
  r.ready.host_key = "node-d-boot-1";
  r.ready.addr = "fd00::4";
  r.ready.port = 51234;
  r.ready.ifname = "eth1";
  r.ready.user_ifname = "eth1";
  r.ready.route_ifname = "eth0";
  r.ready.route_addr = "10.0.0.4";
  PreflightReadyRecord back;
  REQUIRE(decode(encode(r), &back));
  CHECK(back.rank == 3);
  CHECK(back.host == "node-d");
  CHECK(back.pid == 4242);
  CHECK_FALSE(back.ready.enabled);
  CHECK(back.ready.host_key == "node-d-boot-1");
  CHECK(back.ready.addr == "fd00::4");
  CHECK(back.ready.port == 51234);
  CHECK(back.ready.ifname == "eth1");
  CHECK(back.ready.user_ifname == "eth1");
  CHECK(back.ready.route_ifname == "eth0");
  CHECK(back.ready.route_addr == "10.0.0.4");
}

TEST_CASE("preflight records: a plan, a report and a verdict read back as written") {
  PreflightPlanRecord plan{
      {{2, "node-c", 7, "10.0.0.3", 7002}, {0, "node-a", 5, "10.0.0.1", 7000}}};
  PreflightPlanRecord plan_back;
  REQUIRE(decode(encode(plan), &plan_back));
  REQUIRE(plan_back.targets.size() == 2);
  CHECK(plan_back.targets[1].rank == 0);
  CHECK(plan_back.targets[1].host == "node-a");
  CHECK(plan_back.targets[1].pid == 5);
  CHECK(plan_back.targets[1].addr == "10.0.0.1");
  CHECK(plan_back.targets[1].port == 7000);

  PreflightReportRecord report{{{2, true, 0, "reached"}, {0, false, 111, "connect: refused"}}};
  PreflightReportRecord report_back;
  REQUIRE(decode(encode(report), &report_back));
  REQUIRE(report_back.results.size() == 2);
  CHECK(report_back.results[0].reached);
  CHECK(report_back.results[1].rank == 0);
  CHECK_FALSE(report_back.results[1].reached);
  CHECK(report_back.results[1].error == 111);
  CHECK(report_back.results[1].words == "connect: refused");

  const PreflightVerdictRecord verdict{PreflightVerdictRecord::Outcome::failed, 9, "words"};
  PreflightVerdictRecord verdict_back;
  REQUIRE(decode(encode(verdict), &verdict_back));
  CHECK(verdict_back.outcome == PreflightVerdictRecord::Outcome::failed);
  CHECK(verdict_back.code == 9);
  CHECK(verdict_back.words == "words");
}

TEST_CASE("preflight records: values that are not ours are refused") {
  PreflightReadyRecord ready;
  CHECK_FALSE(decode("", &ready));
  CHECK_FALSE(decode("{\"rank\": 1}", &ready));
  PreflightPlanRecord plan;
  CHECK_FALSE(decode("{\"targets\": [[1, \"h\", 2]]}", &plan));
  PreflightReportRecord report;
  CHECK_FALSE(decode("{\"results\": \"x\"}", &report));
  PreflightVerdictRecord verdict;
  CHECK_FALSE(decode("{\"outcome\": 4, \"code\": 0, \"words\": \"\"}", &verdict));
  CHECK_FALSE(decode("[1, 2]", &verdict));
}

TEST_CASE("preflight keys: under the generation, with the rank read back") {
  const Keys k("cc", "job");
  CHECK(k.preflight_ready(Gen{1}, 3) == "cc/job/gen/1/preflight/ready/3");
  CHECK(k.preflight_ready_prefix(Gen{1, 2}) == "cc/job/gen/1.2/preflight/ready/");
  CHECK(k.preflight_plan(Gen{1}, 0) == "cc/job/gen/1/preflight/plan/0");
  CHECK(k.preflight_report(Gen{1}, 12) == "cc/job/gen/1/preflight/report/12");
  CHECK(k.preflight_report_prefix(Gen{1}) == "cc/job/gen/1/preflight/report/");
  CHECK(k.preflight_verdict(Gen{1}) == "cc/job/gen/1/preflight/verdict");
  const std::string ready = k.preflight_ready_prefix(Gen{1});
  CHECK(Keys::rank_under(ready, ready + "12") == 12);
  CHECK_FALSE(Keys::rank_under(ready, ready + "12x").has_value());
  CHECK_FALSE(Keys::rank_under(ready, ready).has_value());
  CHECK_FALSE(Keys::rank_under(ready, k.preflight_plan(Gen{1}, 2)).has_value());
}
