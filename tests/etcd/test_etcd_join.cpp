// Joining a communicator through etcd: the id hand-out, the ranks that
// never came named at the deadline and what comes after it, aborts and
// departures as peer events, a rank killed (told within the heartbeat
// window + 1 s), the leader killed mid-rendezvous (the job completes), two
// of three members killed (a clear error within the deadline), and a wrong
// etcd password. Each join check's words, against cc's own server's, are
// test_rules_conformance's table.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <thread>

#include "rendezvous/etcd/backend.hpp"
#include "rendezvous/etcd/client.hpp"
#include "rendezvous/server.hpp"
#include "tests/common/child_process.hpp"
#include "tests/etcd/etcd_backend.hpp"
#include "tests/etcd/etcd_test.hpp"

namespace etcd = cc::rv::etcd;
using namespace cc::test;
using std::chrono::milliseconds;

namespace {

cc::rv::Join make_join(int rank, int world, int timeout_ms = 10000) {
  return table_join(rank, world, timeout_ms);
}

using Outcome = JoinOutcome;

// `world` ranks of `job` on the shared cluster, each on its own connection,
// all joined.
std::vector<std::unique_ptr<etcd::Backend>> joined_ranks(const std::string& job, int world,
                                                         int window_ms) {
  std::vector<std::unique_ptr<etcd::Backend>> ranks;
  for (int r = 0; r < world; ++r)
    ranks.push_back(connect_backend(backend_options(shared_cluster().address(), job, window_ms)));
  std::vector<std::future<cc::Status>> joins;
  for (int r = 0; r < world; ++r)
    joins.push_back(std::async(std::launch::async, [&, r] {
      cc::rv::Joined j;
      return ranks[static_cast<size_t>(r)]->join(make_join(r, world), &j);
    }));
  for (auto& j : joins) REQUIRE(j.get().ok());
  return ranks;
}

}  // namespace

TEST_CASE("etcd join: every rank gets rank 0's id and the members; a clean leave tells nobody") {
  EtcdCluster& cluster = shared_cluster();
  constexpr int kWorld = 4;
  std::vector<std::unique_ptr<etcd::Backend>> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.push_back(connect_backend(backend_options(cluster.address(), "ids")));
  REQUIRE(ranks[0]->set("kept", std::vector<uint8_t>{1, 2, 3}).ok());
  std::vector<std::future<Outcome>> joins;
  for (int r = kWorld - 1; r >= 0; --r)  // rank 0 last: the others wait for its id
    joins.push_back(std::async(std::launch::async, [&, r] {
      Outcome o;
      o.status = ranks[static_cast<size_t>(r)]->join(make_join(r, kWorld), &o.joined);
      return o;
    }));
  for (auto& j : joins) {
    Outcome o = j.get();
    INFO(o.status.message);
    REQUIRE(o.status.ok());
    CHECK(o.joined.unique_id == std::vector<uint8_t>(128, 0x42));
  }
  // every member's host and pid, for words
  for (int r = 0; r < kWorld; ++r) {
    cc::rv::Progress p;
    REQUIRE(ranks[1]->progress(1, r, &p, milliseconds(1000)).ok());
    REQUIRE(p.members.size() == 1);
    CHECK(p.members[0].rank == r);
    CHECK(p.members[0].host == make_join(r, kWorld).info.host);
    CHECK(p.members[0].pid == static_cast<uint32_t>(1000 + r));
  }
  cc::rv::Progress p;
  CHECK(ranks[1]->progress(1, -1, &p, milliseconds(1000)).code == CC_ERR_INVALID_USAGE);

  for (int r = 1; r < kWorld; ++r) REQUIRE(ranks[static_cast<size_t>(r)]->leave().ok());
  CHECK_FALSE(ranks[0]->next_event(milliseconds(1500)).has_value());
  REQUIRE(ranks[0]->leave().ok());

  // the last to leave removed the generation's keys; the store's data stay
  etcd::ClientOptions co;
  REQUIRE(etcd::parse_address(cluster.address(), &co.address).ok());
  std::unique_ptr<etcd::Client> raw;
  REQUIRE(etcd::Client::create(co, &raw).ok());
  etcd::RangeResult left;
  REQUIRE(raw->range("cc/ids/gen/", etcd::prefix_end("cc/ids/gen/"),
                     Clock::now() + milliseconds(5000), &left)
              .ok());
  CHECK(left.kvs.empty());
  std::vector<uint8_t> kept;
  CHECK(ranks[0]->get("kept", &kept, 0).ok());
  CHECK(kept == std::vector<uint8_t>{1, 2, 3});
}

TEST_CASE("etcd join: at the deadline the ranks that never came are named") {
  EtcdCluster& cluster = shared_cluster();
  const auto t0 = Clock::now();
  std::vector<Outcome> out = run_joins(etcd_connect(cluster.address(), "missing"),
                                       {make_join(0, 4, 1500), make_join(2, 4, 1500)}, 0);
  const long long elapsed = ms_since(t0);
  for (const Outcome& o : out) {
    INFO(o.status.message);
    CHECK(o.status.code == CC_ERR_TIMEOUT);
    CHECK_THAT(
        o.status.message,
        Catch::Contains("ranks 1, 3 of 4 never joined communicator 1 of job 'missing' within "
                        "1500 ms (2 joined)") &&
            Catch::Contains(cluster.endpoint(0)));
  }
  CHECK(elapsed >= 1400);
  CHECK(elapsed < 4000);

  // a rank that comes afterwards is told the generation failed, and why
  out = run_joins(etcd_connect(cluster.address(), "missing"), {make_join(1, 4, 1500)});
  CHECK(out[0].status.code == CC_ERR_MISMATCH);
  CHECK_THAT(out[0].status.message,
             Catch::Contains("already failed: ranks 1, 3 of 4 never joined"));

  // one that comes after a generation completed, for a rank that is alive,
  // is refused in words
  auto alive = etcd_connect(cluster.address(), "late")();
  cc::rv::Joined first;
  REQUIRE(alive->join(make_join(0, 1), &first).ok());
  out = run_joins(etcd_connect(cluster.address(), "late"), {make_join(0, 1)});
  CHECK(out[0].status.code == CC_ERR_MISMATCH);
  CHECK_THAT(out[0].status.message,
             Catch::Contains("after it had completed") && Catch::Contains("is alive"));

  // and once that rank is gone without leaving, one that comes waits as its
  // replacement, and names the regrow that never came at its deadline
  alive.reset();
  out = run_joins(etcd_connect(cluster.address(), "late"), {make_join(0, 1, 1000)});
  CHECK(out[0].status.code == CC_ERR_TIMEOUT);
  CHECK_THAT(out[0].status.message,
             Catch::Contains("rank 0 waited 1000 ms as a replacement in job 'late'") &&
                 Catch::Contains("no cc_comm_regrow took it"));
}

TEST_CASE("etcd join: an abort while joining fails the generation for every rank") {
  EtcdCluster& cluster = shared_cluster();
  auto a = connect_backend(backend_options(cluster.address(), "abort-joining"));
  auto b = connect_backend(backend_options(cluster.address(), "abort-joining"));
  auto ja = std::async(std::launch::async, [&] {
    cc::rv::Joined j;
    return a->join(make_join(0, 3), &j);
  });
  auto jb = std::async(std::launch::async, [&] {
    cc::rv::Joined j;
    return b->join(make_join(1, 3), &j);
  });
  std::this_thread::sleep_for(milliseconds(500));
  const auto t0 = Clock::now();
  REQUIRE(a->abort("the test gives up").ok());
  const cc::Status sa = ja.get();
  const cc::Status sb = jb.get();
  CHECK(ms_since(t0) < 3000);
  for (const cc::Status& s : {sa, sb}) {
    INFO(s.message);
    CHECK(s.code == CC_ERR_ABORTED);
    CHECK_THAT(
        s.message,
        Catch::Contains("rank 0 (host host-a, pid 1000) aborted while joining communicator 1 of "
                        "job 'abort-joining': the test gives up"));
  }
}

TEST_CASE("etcd membership: an abort and a rank gone without leaving reach the others at once") {
  auto ranks = joined_ranks("departures", 3, 5000);

  auto t0 = Clock::now();
  REQUIRE(ranks[2]->abort("rank 2 saw a NaN").ok());
  for (int r = 0; r < 2; ++r)
    check_next_event(*ranks[static_cast<size_t>(r)],
                     {cc::rv::PeerEventKind::aborted, 2, "host-c", 1002, "rank 2 saw a NaN"});
  CHECK(ms_since(t0) < 2000);  // not the 5 s lease: at once

  t0 = Clock::now();
  ranks[1].reset();  // gone without leave()
  auto e = ranks[0]->next_event(milliseconds(3000));
  REQUIRE(e.has_value());
  CHECK(e->kind == cc::rv::PeerEventKind::failed);
  CHECK(e->rank == 1);
  CHECK_THAT(e->reason, Catch::Contains("without leaving"));
  CHECK(ms_since(t0) < 2000);
  CHECK_FALSE(ranks[0]->next_event(milliseconds(200)).has_value());
}

TEST_CASE("etcd membership: a rank's failed init reaches the others at once, in its words") {
  auto ranks = joined_ranks("init-failed", 3, 5000);

  const auto t0 = Clock::now();
  REQUIRE(ranks[1]
              ->init_failed(1, "rank 1: cudaSetDevice(3) failed: invalid device ordinal",
                            milliseconds(3000))
              .ok());
  for (int r : {0, 2})
    check_next_event(*ranks[static_cast<size_t>(r)],
                     {cc::rv::PeerEventKind::init_failed, 1, "host-b", 1001,
                      "rank 1: cudaSetDevice(3) failed: invalid device ordinal"});
  CHECK(ms_since(t0) < 2000);  // not the 5 s lease: at once

  // Its membership ended with the news: dropping it tells nobody again.
  ranks[1].reset();
  CHECK_FALSE(ranks[0]->next_event(milliseconds(500)).has_value());
}

TEST_CASE("etcd membership: a rank with CC_PREFLIGHT=0 skips the reachability test for all") {
  auto ranks = joined_ranks("preflight-off", 3, 5000);
  const std::string note =
      "rank 1 (host host-b, pid 1001) runs with CC_PREFLIGHT=0, so communicator 1 of job "
      "'preflight-off' skips the reachability test before NCCL's init";
  const auto t0 = Clock::now();
  for (int r : {1, 0, 2}) {  // the one that is off first: it waits for nobody
    cc::rv::PreflightReady ready;
    ready.comm_number = 1;
    ready.enabled = r != 1;
    ready.host_key = "key-" + std::to_string(r);
    ready.addr = "127.0.0.1";
    ready.port = 7000;
    ready.timeout_ms = 10000;
    cc::rv::PreflightPlan plan;
    const cc::Status s = ranks[static_cast<size_t>(r)]->preflight_ready(ready, &plan);
    INFO("rank " << r << ": " << s.message);
    REQUIRE(s.ok());
    CHECK(plan.step == cc::rv::PreflightStep::skipped);
    CHECK(plan.note == (r == 1 ? "CC_PREFLIGHT=0" : note));  // its own: as cc's server's client
    CHECK(plan.targets.empty());
  }
  CHECK(ms_since(t0) < 2000);  // the verdict was there: nobody waited for the deadline
  // A member that was no member of that communicator is told so.
  cc::rv::PreflightReady other;
  other.comm_number = 2;
  cc::rv::PreflightPlan plan;
  const cc::Status s = ranks[0]->preflight_ready(other, &plan);
  CHECK(s.code == CC_ERR_INVALID_USAGE);
  CHECK(s.message ==
        "rank 0 (host host-a, pid 1000) asked for the reachability test of communicator 2 of job "
        "'preflight-off', of which it is no member on etcd; join first");
}

TEST_CASE(
    "etcd membership: a killed rank is told to the others within the heartbeat window + 1 s") {
  EtcdCluster& cluster = shared_cluster();
  const char* member = std::getenv("ETCD_MEMBER");
  REQUIRE(member != nullptr);
  constexpr int kWindowMs = 2000;
  const std::string address = cluster.address();
  cc::test::ChildOptions o;
  o.args = {member, address, "killed", "1", "2", std::to_string(kWindowMs)};
  o.pipe_stdout = true;
  o.die_with_parent = true;
  cc::test::ChildProcess child(std::move(o));
  auto survivor = connect_backend(backend_options(address, "killed", kWindowMs));
  cc::rv::Joined joined;
  const cc::Status s = survivor->join(make_join(0, 2), &joined);
  INFO(s.message);
  REQUIRE(s.ok());
  const auto said = child.line(milliseconds(30000));
  REQUIRE(said.has_value());
  CHECK(said->rfind("joined", 0) == 0);

  std::this_thread::sleep_for(milliseconds(700));  // after a keepalive or two
  const auto t0 = Clock::now();
  child.signal(SIGKILL);
  child.reap();
  auto e = survivor->next_event(milliseconds(kWindowMs + 5000));
  const long long told_after = ms_since(t0);
  REQUIRE(e.has_value());
  CHECK(e->kind == cc::rv::PeerEventKind::failed);
  CHECK(e->rank == 1);
  CHECK(e->host == "member-host");
  CHECK_THAT(e->reason,
             Catch::Contains("lease expired") && Catch::Contains("2 s heartbeat window"));
  CHECK(told_after <= kWindowMs + 1000);
}

TEST_CASE("etcd join: the leader killed mid-rendezvous, the job completes") {
  auto cluster = start_cluster(members(3));
  constexpr int kWorld = 16;
  std::vector<std::unique_ptr<etcd::Backend>> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.push_back(connect_backend(backend_options(cluster->address(), "leader-dies")));
  std::vector<std::future<Outcome>> joins;
  auto start = [&](int r) {
    joins.push_back(std::async(std::launch::async, [&, r] {
      Outcome o;
      o.status = ranks[static_cast<size_t>(r)]->join(make_join(r, kWorld, 20000), &o.joined);
      return o;
    }));
  };
  for (int r = 0; r < kWorld / 2; ++r) start(r);
  std::this_thread::sleep_for(milliseconds(500));
  const int leader = cluster->leader();
  REQUIRE(leader >= 0);
  cluster->kill(leader);
  for (int r = kWorld / 2; r < kWorld; ++r) start(r);
  std::vector<Outcome> outcomes;
  for (auto& j : joins) outcomes.push_back(j.get());
  for (size_t r = 0; r < outcomes.size(); ++r) {
    const Outcome& o = outcomes[r];
    INFO("rank " << r << ": " << o.status.message);
    CHECK(o.status.ok());
    CHECK(o.joined.unique_id == std::vector<uint8_t>(128, 0x42));
  }
  // and the job's store still works
  int64_t n = 0;
  CHECK(ranks[3]->add("after", 1, &n).ok());
}

TEST_CASE("etcd join: two of three members killed, a clear error within the deadline") {
  auto cluster = start_cluster(members(3));
  std::vector<std::unique_ptr<etcd::Backend>> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back(connect_backend(backend_options(cluster->address(), "quorum-lost")));
  constexpr int kTimeoutMs = 4000;
  std::vector<std::future<Outcome>> joins;
  const auto t0 = Clock::now();
  for (int r = 0; r < 2; ++r)
    joins.push_back(std::async(std::launch::async, [&, r] {
      Outcome o;
      o.status = ranks[static_cast<size_t>(r)]->join(make_join(r, 4, kTimeoutMs), &o.joined);
      return o;
    }));
  std::this_thread::sleep_for(milliseconds(500));
  int killed = 0;
  for (int m = 0; m < 3 && killed < 2; ++m, ++killed) cluster->kill(m);
  for (int r = 2; r < 4; ++r)
    joins.push_back(std::async(std::launch::async, [&, r] {
      Outcome o;
      o.status = ranks[static_cast<size_t>(r)]->join(make_join(r, 4, kTimeoutMs), &o.joined);
      return o;
    }));
  for (auto& j : joins) {
    Outcome o = j.get();
    INFO(o.status.message);
    CHECK_FALSE(o.status.ok());
    CHECK_THAT(o.status.message,
               Catch::Contains("etcd at " + cluster->endpoint(0)) &&
                   Catch::Contains(cluster->endpoint(2)) && Catch::Contains("quorum") &&
                   Catch::Contains("a cluster of 3 members") && Catch::Contains("needs 2"));
  }
  CHECK(ms_since(t0) < kTimeoutMs + 2500);
}

TEST_CASE("etcd connect: a wrong etcd password is refused with words") {
  auto cluster = start_cluster();
  std::string out;
  REQUIRE(cluster->etcdctl({"user", "add", "root:secret-root"}, &out) == 0);
  REQUIRE(cluster->etcdctl({"role", "add", "root"}, &out) == 0);
  REQUIRE(cluster->etcdctl({"user", "grant-role", "root", "root"}, &out) == 0);
  REQUIRE(cluster->etcdctl({"user", "add", "trainer:right-one"}, &out) == 0);
  REQUIRE(cluster->etcdctl({"role", "add", "cc-jobs"}, &out) == 0);
  REQUIRE(cluster->etcdctl(
              {"role", "grant-permission", "cc-jobs", "--prefix=true", "readwrite", "cc/"}, &out) ==
          0);
  REQUIRE(cluster->etcdctl({"user", "grant-role", "trainer", "cc-jobs"}, &out) == 0);
  INFO(out);
  REQUIRE(cluster->etcdctl({"auth", "enable"}, &out) == 0);

  const std::string wrong = cluster->dir() + "/wrong-auth";
  std::ofstream(wrong) << "trainer:not-it\n";
  ::chmod(wrong.c_str(), 0600);
  auto o = backend_options(cluster->address(), "secured");
  o.auth_file = wrong;
  std::unique_ptr<etcd::Backend> b;
  const auto t0 = Clock::now();
  cc::Status s = etcd::Backend::connect(o, &b);
  CHECK(s.code == CC_ERR_AUTH);
  CHECK(ms_since(t0) < 3000);
  CHECK_THAT(s.message, Catch::Contains("refused the user 'trainer'") && Catch::Contains(wrong) &&
                            Catch::Contains("invalid user ID or password"));

  const std::string right = cluster->dir() + "/right-auth";
  std::ofstream(right) << "trainer:right-one\n";
  ::chmod(right.c_str(), 0600);
  o.auth_file = right;
  b = connect_backend(o);
  REQUIRE(b->set("k", std::vector<uint8_t>{1}).ok());
  cc::rv::Joined joined;
  cc::Status js = b->join(make_join(0, 1), &joined);
  INFO(js.message);
  CHECK(js.ok());

  // a user without a role on cc's prefix is refused in words
  o.prefix = "elsewhere";
  auto outside = connect_backend(o);
  s = outside->set("k", std::vector<uint8_t>{1});
  CHECK(s.code == CC_ERR_AUTH);
  CHECK_THAT(s.message, Catch::Contains("permission denied") && Catch::Contains("'trainer'"));
}
