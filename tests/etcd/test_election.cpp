// The election of cc's server and its durable store, against real etcd:
// one candidate of several leads and publishes its address; the next one
// takes over the moment the leader resigns; a leader whose key was taken
// from it finds itself deposed on its next write, which fails and lands
// nothing; what a leader kept is what the next one reads back, sessions
// with their answers; with the cluster's quorum lost a write fails naming
// etcd within its deadline.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "rendezvous/etcd/election.hpp"
#include "rendezvous/etcd/keys.hpp"
#include "tests/etcd/etcd_test.hpp"

namespace {

using cc::test::Clock;
using std::chrono::milliseconds;

std::unique_ptr<cc::rv::Election> open(const cc::test::EtcdCluster& cluster,
                                       const std::string& prefix,
                                       milliseconds lease = milliseconds(2000),
                                       milliseconds request = milliseconds(3000)) {
  cc::rv::etcd::ElectionOptions o;
  REQUIRE(cc::rv::etcd::parse_address(cluster.address(), &o.client.address).ok());
  o.prefix = prefix;
  o.lease = lease;
  o.request_timeout = request;
  o.client.attempt_timeout = milliseconds(500);
  std::unique_ptr<cc::rv::Election> e;
  const cc::Status s = cc::rv::etcd::open_election(o, Clock::now() + milliseconds(10000), &e);
  INFO(s.message);
  REQUIRE(s.ok());
  return e;
}

Clock::time_point soon() { return Clock::now() + milliseconds(5000); }

cc::rv::DurableWrite put(const std::string& job, const std::string& key, const std::string& value,
                         const std::string& session = "", uint32_t rid = 0, int64_t answer = 0) {
  cc::rv::DurableWrite w;
  w.job = job;
  w.key = key;
  w.value = std::vector<uint8_t>(value.begin(), value.end());
  w.session = session;
  w.request_id = rid;
  w.answer = answer;
  return w;
}

struct Loaded {
  std::map<std::string, std::string> keys;  // "job/key" -> value
  std::map<std::string, std::pair<uint32_t, int64_t>> sessions;
};

Loaded load(cc::rv::Leadership& l) {
  Loaded out;
  const cc::Status s = l.load(
      [&](const cc::rv::DurableWrite& w) {
        out.keys[w.job + "/" + w.key] = std::string(w.value->begin(), w.value->end());
      },
      [&](const cc::rv::DurableSession& d) {
        out.sessions[d.job + "/" + d.session] = {d.request_id, d.answer};
      });
  INFO(s.message);
  REQUIRE(s.ok());
  return out;
}

}  // namespace

TEST_CASE("election: one candidate leads and publishes; the next takes over when it resigns") {
  auto& cluster = cc::test::shared_cluster();
  auto a = open(cluster, "elect-1");
  auto b = open(cluster, "elect-1");
  std::unique_ptr<cc::rv::Leadership> la, lb;
  REQUIRE(a->campaign("job-x", "10.0.0.1:4000", soon(), &la).ok());
  REQUIRE(la);
  CHECK(la->leading());
  REQUIRE(b->campaign("job-x", "10.0.0.2:4000", soon(), &lb).ok());
  CHECK_FALSE(lb);  // a leads
  std::string where;
  REQUIRE(b->leader("job-x", soon(), &where).ok());
  CHECK(where == "10.0.0.1:4000");
  // Scopes are apart: the daemons' election is not the job's.
  REQUIRE(b->leader("", soon(), &where).ok());
  CHECK(where.empty());

  const auto resigned = Clock::now();
  la->resign();
  CHECK_FALSE(la->leading());
  REQUIRE(b->campaign("job-x", "10.0.0.2:4000", soon(), &lb).ok());
  REQUIRE(lb);  // at once, not after the lease
  CHECK(cc::test::ms_since(resigned) < 2000);
  REQUIRE(a->leader("job-x", soon(), &where).ok());
  CHECK(where == "10.0.0.2:4000");
}

TEST_CASE("election: the store a leader kept is what the next one reads, sessions included") {
  auto& cluster = cc::test::shared_cluster();
  auto a = open(cluster, "elect-2");
  std::unique_ptr<cc::rv::Leadership> la;
  REQUIRE(a->campaign("", "a:1", soon(), &la).ok());
  REQUIRE(la);
  REQUIRE(la->write(put("job/1", "ckpt", "s3://bucket/7")).ok());
  REQUIRE(la->write(put("job/1", "count", "41", "sess-A", 9, 41)).ok());
  REQUIRE(la->write(put("job/1", "count", "42", "sess-B", 3, 42)).ok());
  REQUIRE(la->write(put("other", "x", std::string("\0\1\2", 3))).ok());
  cc::rv::DurableWrite gone = put("job/1", "tmp", "t");
  REQUIRE(la->write(gone).ok());
  gone.value.reset();
  REQUIRE(la->write(gone).ok());
  la->resign();

  auto b = open(cluster, "elect-2");
  std::unique_ptr<cc::rv::Leadership> lb;
  REQUIRE(b->campaign("", "b:1", soon(), &lb).ok());
  REQUIRE(lb);
  Loaded got = load(*lb);
  CHECK(got.keys.size() == 3);
  CHECK(got.keys["job/1/ckpt"] == "s3://bucket/7");
  CHECK(got.keys["job/1/count"] == "42");
  CHECK(got.keys["other/x"] == std::string("\0\1\2", 3));
  CHECK(got.sessions["job/1/sess-A"] == std::make_pair(uint32_t{9}, int64_t{41}));
  CHECK(got.sessions["job/1/sess-B"] == std::make_pair(uint32_t{3}, int64_t{42}));

  // A job's TTL passed: its keys and sessions go, the other job's stay.
  REQUIRE(lb->forget_job("job/1").ok());
  got = load(*lb);
  CHECK(got.keys.size() == 1);
  CHECK(got.sessions.empty());
}

TEST_CASE("election: a deposed leader's write fails, lands nothing, and it is told once") {
  auto& cluster = cc::test::shared_cluster();
  auto a = open(cluster, "elect-3");
  std::unique_ptr<cc::rv::Leadership> la;
  REQUIRE(a->campaign("job", "a:1", soon(), &la).ok());
  REQUIRE(la);
  std::atomic<int> told{0};
  la->on_lost([&] { ++told; });
  REQUIRE(la->write(put("job", "k", "from a")).ok());

  // The leader key is taken from it (its lease ended while it was away),
  // and another candidate wins.
  REQUIRE(cluster.etcdctl({"del", cc::rv::etcd::keys::leader("elect-3", "job")}) == 0);
  auto b = open(cluster, "elect-3");
  std::unique_ptr<cc::rv::Leadership> lb;
  REQUIRE(b->campaign("job", "b:1", soon(), &lb).ok());
  REQUIRE(lb);

  const cc::Status late = la->write(put("job", "k", "late from a"));
  CHECK(late.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(late.message, Catch::Contains("no longer leads"));
  CHECK_FALSE(la->leading());
  CHECK(told == 1);
  // a's last write stands; its late one never landed.
  Loaded got = load(*lb);
  CHECK(got.keys["job/k"] == "from a");
  REQUIRE(lb->write(put("job", "k", "from b")).ok());
  CHECK(load(*lb).keys["job/k"] == "from b");
}

TEST_CASE("election: a leader whose lease ended is deposed by its keeper and told") {
  auto& cluster = cc::test::shared_cluster();
  auto a = open(cluster, "elect-4");
  std::unique_ptr<cc::rv::Leadership> la;
  REQUIRE(a->campaign("", "a:1", soon(), &la).ok());
  REQUIRE(la);
  std::atomic<int> told{0};
  la->on_lost([&] { ++told; });
  // etcd revokes its lease (as when etcd expired it during a pause).
  std::string out;
  REQUIRE(cluster.etcdctl({"get", cc::rv::etcd::keys::leader("elect-4", ""), "-w", "fields"},
                          &out) == 0);
  const size_t at = out.find("\"Lease\" : ");
  REQUIRE(at != std::string::npos);
  const long long lease = std::stoll(out.substr(at + 10));
  char hex[32];
  std::snprintf(hex, sizeof hex, "%llx", lease);
  REQUIRE(cluster.etcdctl({"lease", "revoke", hex}) == 0);
  const auto t0 = Clock::now();
  while (la->leading() && cc::test::ms_since(t0) < 5000)
    std::this_thread::sleep_for(milliseconds(20));
  CHECK_FALSE(la->leading());
  CHECK(told == 1);
  CHECK(la->write(put("", "k", "v")).code == CC_ERR_RENDEZVOUS);
}

TEST_CASE("election: with the quorum lost a write fails naming etcd within its deadline") {
  auto cluster = cc::test::start_cluster(cc::test::members(3));
  auto a = open(*cluster, "elect-5", milliseconds(2000), milliseconds(2000));
  std::unique_ptr<cc::rv::Leadership> la;
  REQUIRE(a->campaign("", "a:1", soon(), &la).ok());
  REQUIRE(la);
  REQUIRE(la->write(put("j", "k", "1")).ok());
  cluster->kill(1);
  cluster->kill(2);
  const auto t0 = Clock::now();
  const cc::Status s = la->write(put("j", "k", "2"));
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.message, Catch::Contains("etcd"));
  CHECK(cc::test::ms_since(t0) < 6000);
  // Its lease cannot be renewed: it stops counting itself the leader.
  while (la->leading() && cc::test::ms_since(t0) < 6000)
    std::this_thread::sleep_for(milliseconds(50));
  CHECK_FALSE(la->leading());
}
