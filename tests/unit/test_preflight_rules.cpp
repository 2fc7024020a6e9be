// The reachability test's rule (rendezvous/rules/preflight_rules.*) alone,
// as both backends feed it, with no server and no etcd: each member's
// targets (ring successor, the root from the lowest rank of each other host,
// members of one host skipped, untestable targets skipped), the verdict from
// the reports at hand with its exact message, and the notes and failure messages
// that skip or end the test.
#include <catch2/catch.hpp>

#include <cerrno>
#include <string>
#include <vector>

#include "rendezvous/rules/preflight_rules.hpp"
#include "rendezvous/rules/words.hpp"

using namespace cc::rv;
using rules::PreflightFacts;

namespace {

// Rank r on host `host` (pid 1000 + r), listening at addr:port, NCCL's own
// choice of interface eth0, whose route to the rendezvous leaves there too.
PreflightFacts member(int32_t r, const std::string& host, const std::string& addr, uint32_t port) {
  PreflightFacts m;
  m.info.rank = r;
  m.info.host = host;
  m.info.pid = 1000 + static_cast<uint32_t>(r);
  m.ready.host_key = host + "-key";
  m.ready.addr = addr;
  m.ready.port = port;
  m.ready.ifname = "eth0";
  m.ready.route_ifname = "eth0";
  m.ready.route_addr = addr;
  return m;
}

std::vector<int32_t> ranks_of(const std::vector<ProbeTarget>& targets) {
  std::vector<int32_t> out;
  for (const ProbeTarget& t : targets) out.push_back(t.rank);
  return out;
}

// Two hosts, a and b, one rank each.
std::vector<PreflightFacts> two_hosts() {
  return {member(0, "a", "10.0.0.1", 7000), member(1, "b", "10.0.0.2", 7001)};
}

}  // namespace

TEST_CASE("preflight rule: the ring successor, and the root from the first rank of each host") {
  std::vector<PreflightFacts> m;
  const char* hosts[] = {"a", "a", "b", "b", "c", "c"};
  for (int32_t r = 0; r < 6; ++r)
    m.push_back(member(r, hosts[r], "10.0.0." + std::to_string(r + 1), 7000 + uint32_t(r)));
  const auto t = rules::preflight_targets(m);
  REQUIRE(t.size() == 6);
  CHECK(ranks_of(t[0]).empty());                     // 0 -> 1: one host
  CHECK(ranks_of(t[1]) == std::vector<int32_t>{2});  // ring to host b
  CHECK(ranks_of(t[2]) == std::vector<int32_t>{0});  // first of b: the root
  CHECK(ranks_of(t[3]) == std::vector<int32_t>{4});  // ring to host c
  CHECK(ranks_of(t[4]) == std::vector<int32_t>{0});  // first of c: the root
  CHECK(ranks_of(t[5]) == std::vector<int32_t>{0});  // the ring wraps to the root
  CHECK(t[1][0].addr == "10.0.0.3");
  CHECK(t[1][0].port == 7002);
  CHECK(t[1][0].host == "b");
  CHECK(t[1][0].pid == 1002);
}

TEST_CASE("preflight rule: one host, or targets that listen nowhere, leave nothing to test") {
  std::vector<PreflightFacts> m = {member(0, "a", "10.0.0.1", 7000),
                                   member(1, "a", "10.0.0.1", 7001)};
  for (const auto& t : rules::preflight_targets(m)) CHECK(t.empty());
  m = two_hosts();
  m[1].ready.port = 0;  // rank 1 could not listen: nobody tests it
  const auto t = rules::preflight_targets(m);
  CHECK(t[0].empty());
  CHECK(ranks_of(t[1]) == std::vector<int32_t>{0});
}

TEST_CASE("preflight rule: every connection reached passes; a silent rank is named, not failed") {
  std::vector<PreflightFacts> m = two_hosts();
  m[0].reported = true;
  m[0].results = {{1, true, 0, "reached"}};
  rules::PreflightVerdict v = rules::preflight_verdict(m);
  CHECK(v.passed);
  CHECK(v.words.empty());
  CHECK(v.tested == 1);
  CHECK(v.silent == std::vector<int32_t>{1});
  m[1].reported = true;
  m[1].results = {{0, true, 0, "reached"}, {7, false, ECONNREFUSED, "out of range: ignored"}};
  v = rules::preflight_verdict(m);
  CHECK(v.passed);
  CHECK(v.tested == 2);
  CHECK(v.silent.empty());
}

TEST_CASE("preflight rule: a refused connection fails the test in one text with cause and fix") {
  std::vector<PreflightFacts> m = two_hosts();
  m[0].reported = m[1].reported = true;
  m[0].results = {{1, false, ECONNREFUSED, "connect: Connection refused"}};
  m[1].results = {{0, true, 0, "reached"}};
  const rules::PreflightVerdict v = rules::preflight_verdict(m);
  CHECK_FALSE(v.passed);
  CHECK(v.tested == 2);
  CHECK(v.words ==
        "the reachability test before NCCL's init failed, so NCCL would hang or fail there: "
        "rank 0 (host a, pid 1000) cannot connect to rank 1 (host b, pid 1001) at "
        "10.0.0.2:7001, the address NCCL will use for it (interface eth0, chosen by cc: the "
        "route to the rendezvous leaves there): connect: Connection refused. Likely cause: the "
        "connection was refused although the test listened there: a firewall on host b or "
        "between the hosts rejects it; rank 1 did connect to rank 0, so the other way works and "
        "the block is one-way. Fix: allow incoming TCP from the job's other hosts on host b "
        "(NCCL listens on ephemeral ports: allow the hosts' addresses, not single ports; e.g. "
        "'iptables -I INPUT -p tcp -s 10.0.0.1 -j ACCEPT' or 'nft insert rule inet filter input "
        "ip saddr 10.0.0.1 accept'), and check the routes both ways ('ip route get 10.0.0.2' on "
        "host a, 'ip route get 10.0.0.1' on host b). (CC_PREFLIGHT=0 skips this test.)");
}

TEST_CASE("preflight rule: the loopback address, a NAT, and several failures, in words") {
  std::vector<PreflightFacts> m = two_hosts();
  m[1].ready.addr = "127.0.0.1";
  m[0].results = {{1, false, ECONNREFUSED, "connect: Connection refused"}};
  std::string w = rules::preflight_verdict(m).words;
  CHECK_THAT(w, Catch::Contains("Likely cause: NCCL will use the loopback address 127.0.0.1 on "
                                "host b, which no other host reaches. Fix: set "
                                "NCCL_SOCKET_IFNAME on host b to an interface the other hosts "
                                "reach."));
  m = two_hosts();
  m[1].peer = "192.168.1.9";  // its rendezvous connection came through a NAT
  m[0].results = {{1, false, ETIMEDOUT, "connect: no answer within 1200 ms (timed out)"}};
  w = rules::preflight_verdict(m).words;
  CHECK_THAT(w, Catch::Contains("Likely cause: a NAT (a Docker bridge network, say) sits between "
                                "host b and the other hosts: the connection of rank 1 to the "
                                "rendezvous arrived from 192.168.1.9, but its own address is "
                                "10.0.0.2"));
  m[1].peer.clear();  // a backend that cannot see it (etcd): no NAT is guessed
  w = rules::preflight_verdict(m).words;
  CHECK_THAT(w, Catch::Contains("Likely cause: nothing answered: a firewall drops TCP "
                                "connections into host b from host a, or a route exists one way "
                                "only. Fix:"));
  m.push_back(member(2, "c", "10.0.0.3", 7002));
  m[1].results = {{2, false, EHOSTUNREACH, "connect: No route to host"}};
  m[2].results = {{0, false, EHOSTUNREACH, "connect: No route to host"}};
  w = rules::preflight_verdict(m).words;
  CHECK_THAT(w,
             Catch::StartsWith("the reachability test before NCCL's init failed (3 of the "
                               "connections NCCL needs cannot be made), so NCCL would hang or "
                               "fail there: rank 0 (host a, pid 1000) cannot connect to rank 1"));
  CHECK_THAT(w, Catch::EndsWith(" Also: rank 1 (host b, pid 1001) to rank 2 (host c, pid 1002) "
                                "at 10.0.0.3:7002: connect: No route to host; rank 2 (host c, "
                                "pid 1002) to rank 0 (host a, pid 1000) at 10.0.0.1:7000: "
                                "connect: No route to host. (CC_PREFLIGHT=0 skips this test.)"));
}

TEST_CASE("preflight rule: the notes that skip the test, and a member's failure, in words") {
  const std::string where = rules::communicator_where("j", 1);
  CHECK(rules::preflight_disabled_words(two_hosts()[1].info, where) ==
        "rank 1 (host b, pid 1001) runs with CC_PREFLIGHT=0, so communicator 1 of job 'j' skips "
        "the reachability test before NCCL's init");
  CHECK(rules::preflight_missing_words({2}, where, 10000) ==
        "rank 2 of communicator 1 of job 'j' did not take part in the reachability test within "
        "10000 ms (a cc without it?), so NCCL's init starts untested");
  CHECK(rules::preflight_missing_words({1, 2, 3}, where, 500) ==
        "ranks 1-3 of communicator 1 of job 'j' did not take part in the reachability test "
        "within 500 ms (a cc without it?), so NCCL's init starts untested");
  const std::string who = "rank 2 (host c, pid 9)";
  CHECK(rules::preflight_member_failed_words(PeerEventKind::init_failed, who, "no GPU") ==
        "rank 2 (host c, pid 9) could not start: no GPU");
  CHECK(rules::preflight_member_failed_words(PeerEventKind::aborted, who, "stop") ==
        "rank 2 (host c, pid 9) aborted during init: stop");
  CHECK(rules::preflight_member_failed_words(PeerEventKind::failed, who, "reset") ==
        "rank 2 (host c, pid 9) was lost during init: reset. It crashed, was killed or lost its "
        "network: look at its output");
}
