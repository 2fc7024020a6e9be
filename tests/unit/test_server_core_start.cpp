// A communicator's start as the server's state machine runs it: init
// failures spread to every member with the failing rank's message, and the
// reachability test before NCCL's init (plans, verdicts and their messages).
// Driven directly, with a fake Sink and a fake clock: no sockets.
#include <catch2/catch.hpp>

#include <set>

#include "tests/unit/server_core_harness.hpp"

using namespace cc::test;

namespace {

// n ranks of one job joined generation 0 on connections 1..n (ConnId rank+1,
// which the harness connects from 10.0.0.<id>); hosts[r] names rank r's host.
void join_all(Harness& h, const std::vector<std::string>& hosts) {
  const int n = static_cast<int>(hosts.size());
  for (int r = 0; r < n; ++r) h.client(static_cast<rv::ConnId>(r + 1));
  for (int r = 0; r < n; ++r)
    h.feed(static_cast<rv::ConnId>(r + 1), join_msg(r, n, hosts[static_cast<size_t>(r)]), 10);
  for (int r = 0; r < n; ++r)
    REQUIRE(std::holds_alternative<rv::Joined>(h.one(static_cast<rv::ConnId>(r + 1))));
}

// What a rank on `host_key` listening at addr:port says; its route to the
// rendezvous leaves from addr (no NAT) unless the test says otherwise.
rv::PreflightReady ready(const std::string& host_key, const std::string& addr, uint32_t port) {
  rv::PreflightReady m;
  m.comm_number = 0;
  m.host_key = host_key;
  m.addr = addr;
  m.port = port;
  m.ifname = "eth0";
  m.route_ifname = "eth0";
  m.route_addr = addr;
  m.timeout_ms = 10000;
  return m;
}

rv::PreflightPlan plan_of(Harness& h, rv::ConnId id) { return h.one_as<rv::PreflightPlan>(id); }

rv::PreflightReport report(std::vector<rv::ProbeResult> results) {
  return rv::PreflightReport{0, std::move(results), 5000};
}

}  // namespace

TEST_CASE("start: a member's failed init is told to every other member in its own words") {
  Harness h;
  join_all(h, {"a", "b", "c"});
  h.feed(2, rv::InitFailed{0, "ncclCommInitRankConfig failed on rank 1: invalid usage"}, 11);
  CHECK(std::holds_alternative<rv::Ok>(h.one(2)));
  for (rv::ConnId i : {1, 3}) {
    auto v = h.take(i);
    REQUIRE(v.size() == 1);
    CHECK(v[0].request_id == 0);
    const auto& ev = std::get<rv::PeerEvent>(v[0].message);
    CHECK(ev.kind == rv::PeerEventKind::init_failed);
    CHECK(ev.rank == 1);
    CHECK(ev.host == "b");
    CHECK(ev.pid == 1001);
    CHECK(ev.reason == "ncclCommInitRankConfig failed on rank 1: invalid usage");
  }
  h.core.on_disconnect(2, "end of stream");  // its drop is not announced again
  CHECK(h.take(1).empty());
  CHECK(h.take(3).empty());
  // Counted once, as an init failure (the metrics' cause="init").
  const rv::ServerMetrics m = h.core.metrics(h.now);
  CHECK(m.counters.failures[static_cast<size_t>(rv::FailureCause::init)] == 1);
  CHECK(m.counters.failures[static_cast<size_t>(rv::FailureCause::disconnect)] == 0);
}

TEST_CASE("start: an init failure reported by a rank that never joined is refused in words") {
  Harness h;
  h.client(1);
  h.feed(1, rv::InitFailed{4, "x"});
  const auto e = h.error_of(h.one(1));
  CHECK(e.code == CC_ERR_INVALID_USAGE);
  CHECK_THAT(e.message, Catch::Contains("has not joined"));
}

TEST_CASE("start: every rank on one host has nothing to test") {
  Harness h;
  join_all(h, {"a", "a", "a"});
  for (rv::ConnId i = 1; i <= 3; ++i) h.feed(i, ready("host-a", "10.0.0.1", 100 + i), 20);
  for (rv::ConnId i = 1; i <= 3; ++i) {
    const auto p = plan_of(h, i);
    CHECK(p.step == rv::PreflightStep::passed);
    CHECK(p.targets.empty());
  }
  // A late report of a decided test is answered at once.
  h.feed(1, report({}));
  CHECK(std::holds_alternative<rv::Ok>(h.one(1)));
}

TEST_CASE("start: plans test ring successors and the root once per host, then pass") {
  Harness h;
  // hosts: ranks 0,1 on A; 2,3 on B; 4,5 on C
  join_all(h, {"a", "a", "b", "b", "c", "c"});
  const char* keys[] = {"A", "A", "B", "B", "C", "C"};
  for (int r = 0; r < 6; ++r)
    h.feed(static_cast<rv::ConnId>(r + 1),
           ready(keys[r], "10.0.0." + std::to_string(r + 1), static_cast<uint32_t>(7000 + r)), 20);
  std::vector<rv::PreflightPlan> plans;
  for (rv::ConnId i = 1; i <= 6; ++i) plans.push_back(plan_of(h, i));
  for (const auto& p : plans) CHECK(p.step == rv::PreflightStep::probe);
  CHECK(ranks_of<std::set<int>>(plans[0].targets).empty());              // 0->1 same host
  CHECK(ranks_of<std::set<int>>(plans[1].targets) == std::set<int>{2});  // ring to host B
  CHECK(ranks_of<std::set<int>>(plans[2].targets) == std::set<int>{0});  // first of B: the root
  CHECK(ranks_of<std::set<int>>(plans[3].targets) == std::set<int>{4});  // ring to host C
  CHECK(ranks_of<std::set<int>>(plans[4].targets) == std::set<int>{0});  // first of C: the root
  CHECK(ranks_of<std::set<int>>(plans[5].targets) == std::set<int>{0});  // ring wraps to the root
  CHECK(plans[1].targets[0].addr == "10.0.0.3");
  CHECK(plans[1].targets[0].port == 7002);
  CHECK(plans[1].targets[0].host == "b");
  CHECK(plans[1].targets[0].pid == 1002);
  for (int r = 0; r < 6; ++r) {
    std::vector<rv::ProbeResult> results;
    for (const auto& t : plans[static_cast<size_t>(r)].targets)
      results.push_back({t.rank, true, 0, "reached"});
    h.feed(static_cast<rv::ConnId>(r + 1), report(results), 30);
    if (r < 5) CHECK(h.take(static_cast<rv::ConnId>(r + 1)).empty());  // parked until all report
  }
  for (rv::ConnId i = 1; i <= 6; ++i) {
    auto v = h.take(i);
    REQUIRE(v.size() == 1);
    CHECK(v[0].request_id == 30);
    CHECK(std::holds_alternative<rv::Ok>(v[0].message));
  }
}

TEST_CASE("start: a failed connection gives every rank the same words with cause and fix") {
  Harness h;
  join_all(h, {"a", "b"});
  // Rank 0 says `a` and rank 1 says `b`; the plans they get back.
  const auto plans = [&h](const rv::PreflightReady& a, const rv::PreflightReady& b) {
    h.feed(1, a, 20);
    h.feed(2, b, 20);
    const rv::PreflightPlan p0 = plan_of(h, 1);
    return std::make_pair(p0, plan_of(h, 2));
  };
  SECTION("the target sits behind a NAT") {
    // B listens at 172.18.0.2, but its connection came from 10.0.0.2.
    const auto [p0, p1] = plans(ready("A", "10.0.0.1", 7000), ready("B", "172.18.0.2", 7001));
    CHECK(ranks_of<std::set<int>>(p0.targets) == std::set<int>{1});
    CHECK(ranks_of<std::set<int>>(p1.targets) == std::set<int>{0});
    h.feed(1, report({{1, false, ENETUNREACH, "connect: Network is unreachable"}}), 30);
    h.feed(2, report({{0, true, 0, "reached"}}), 31);
    const auto e1 = h.error_of(h.one(1));
    const auto e2 = h.error_of(h.one(2));
    CHECK(e1.code == CC_ERR_SYSTEM);
    CHECK(e1.message == e2.message);
    CHECK_THAT(e1.message,
               Catch::Contains("rank 0 (host a, pid 1000) cannot connect to rank 1 (host b, pid "
                               "1001) at 172.18.0.2:7001") &&
                   Catch::Contains("Network is unreachable") && Catch::Contains("NAT") &&
                   Catch::Contains("the connection of rank 1 to the rendezvous arrived from "
                                   "10.0.0.2") &&
                   Catch::Contains("--network host") && Catch::Contains("Fix:"));
  }
  SECTION("NCCL_SOCKET_IFNAME set by hand to an interface that does not lead to the others") {
    rv::PreflightReady a = ready("A", "198.19.7.2", 7000);
    a.ifname = "ccmgmt0";
    a.user_ifname = "ccmgmt0";
    a.route_ifname = "cceth0";
    a.route_addr = "10.0.0.1";
    plans(a, ready("B", "10.0.0.2", 7001));
    h.feed(2, report({{0, false, ETIMEDOUT, "connect: no answer within 1200 ms (timed out)"}}));
    h.feed(1, report({{1, true, 0, "reached"}}));
    const auto e = h.error_of(h.one(2));
    CHECK(h.error_of(h.one(1)).message == e.message);
    CHECK_THAT(e.message, Catch::Contains("rank 1 (host b, pid 1001) cannot connect to rank 0") &&
                              Catch::Contains("198.19.7.2:7000") &&
                              Catch::Contains("NCCL_SOCKET_IFNAME=ccmgmt0 was set by hand") &&
                              Catch::Contains("leaves through cceth0") &&
                              Catch::Contains("set NCCL_SOCKET_IFNAME=cceth0"));
  }
  SECTION("a firewall drops connections one way") {
    plans(ready("A", "10.0.0.1", 7000), ready("B", "10.0.0.2", 7001));
    h.feed(1, report({{1, false, ETIMEDOUT, "connect: no answer within 1200 ms (timed out)"}}));
    h.feed(2, report({{0, true, 0, "reached"}}));
    const auto e = h.error_of(h.one(1));
    h.one(2);
    CHECK_THAT(e.message, Catch::Contains("cannot connect to rank 1") &&
                              Catch::Contains("no answer within 1200 ms") &&
                              Catch::Contains("firewall") && Catch::Contains("one-way") &&
                              Catch::Contains("rank 1 did connect to rank 0"));
  }
}

TEST_CASE("start: a member lost or failing before the verdict fails the test for everyone") {
  Harness h;
  join_all(h, {"a", "b", "c"});
  h.feed(1, ready("A", "10.0.0.1", 7000), 20);
  SECTION("lost while the others wait for its endpoint") {
    h.core.on_disconnect(3, "connection reset by peer");
    auto v = h.take(1);  // its parked step's answer, and the event every member gets
    REQUIRE(v.size() == 2);
    CHECK(v[0].request_id == 20);
    const auto e = h.error_of(v[0].message);
    CHECK(e.code == CC_ERR_PEER_FAILED);
    CHECK_THAT(e.message, Catch::Contains("rank 2 (host c, pid 1002) was lost during init") &&
                              Catch::Contains("connection reset by peer"));
    CHECK(std::get<rv::PeerEvent>(v[1].message).rank == 2);
    CHECK(std::get<rv::PeerEvent>(h.one(2)).rank == 2);
    h.feed(2, ready("B", "10.0.0.2", 7001), 21);  // a later step gets the same message
    CHECK(h.error_of(h.one(2)).message == e.message);
  }
  SECTION("its init failed while the others test") {
    h.feed(2, ready("B", "10.0.0.2", 7001), 20);
    h.feed(3, ready("C", "10.0.0.3", 7002), 20);
    for (rv::ConnId i = 1; i <= 3; ++i) plan_of(h, i);
    h.feed(1, report({{1, true, 0, "reached"}}), 30);
    h.feed(3, rv::InitFailed{0, "cudaMalloc failed: out of memory"}, 31);
    CHECK(std::holds_alternative<rv::Ok>(h.one(3)));
    auto v = h.take(1);
    REQUIRE(v.size() == 2);  // the parked report's answer and the event
    const auto& e = h.error_of(v[0].message);
    CHECK(v[0].request_id == 30);
    CHECK(e.code == CC_ERR_PEER_FAILED);
    CHECK_THAT(e.message, Catch::Contains("rank 2 (host c, pid 1002) could not start: cudaMalloc "
                                          "failed: out of memory"));
    CHECK(std::get<rv::PeerEvent>(v[1].message).kind == rv::PeerEventKind::init_failed);
  }
}

TEST_CASE("start: one rank with CC_PREFLIGHT=0 skips the test for all, without waiting") {
  Harness h;
  join_all(h, {"a", "b"});
  h.feed(1, ready("A", "10.0.0.1", 7000), 20);
  rv::PreflightReady off = ready("B", "10.0.0.2", 0);
  off.enabled = false;
  h.feed(2, off, 21);
  CHECK(std::holds_alternative<rv::Ok>(h.one(2)));  // answered at once, nobody waits for it
  const auto p = plan_of(h, 1);
  CHECK(p.step == rv::PreflightStep::skipped);
  CHECK_THAT(p.note, Catch::Contains("rank 1 (host b, pid 1001) runs with CC_PREFLIGHT=0"));
}

TEST_CASE(
    "start: deadlines: a rank that never takes part skips the test; a silent reporter "
    "does not hold the verdict") {
  Harness h;
  join_all(h, {"a", "b", "c"});
  SECTION("never sends its endpoint") {
    rv::PreflightReady a = ready("A", "10.0.0.1", 7000);
    a.timeout_ms = 500;
    h.feed(1, a, 20);
    h.feed(2, ready("B", "10.0.0.2", 7001), 20);
    h.advance(499ms);
    CHECK(h.take(1).empty());
    h.advance(1ms);
    for (rv::ConnId i : {1, 2}) {
      const auto p = plan_of(h, i);
      CHECK(p.step == rv::PreflightStep::skipped);
      CHECK_THAT(p.note,
                 Catch::Contains("rank 2 of communicator 0 of job 'job' did not take part"));
    }
  }
  SECTION("never reports") {
    for (rv::ConnId i = 1; i <= 3; ++i)
      h.feed(i,
             ready(std::string(1, static_cast<char>('A' + i)), "10.0.0." + std::to_string(i),
                   7000 + i),
             20);
    for (rv::ConnId i = 1; i <= 3; ++i) plan_of(h, i);
    rv::PreflightReport r = report({{1, false, ECONNREFUSED, "connect: Connection refused"}});
    r.timeout_ms = 300;
    h.feed(1, r, 30);
    h.feed(2, report({{2, true, 0, "reached"}}), 31);
    h.advance(300ms);
    const auto e = h.error_of(h.one(1));
    CHECK(h.error_of(h.one(2)).message == e.message);
    CHECK_THAT(e.message, Catch::Contains("Connection refused") && Catch::Contains("firewall"));
  }
}
