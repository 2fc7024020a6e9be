// cc-rendezvous --etcd as an operator runs it: two or three daemons on one
// etcd cluster, one of which leads and serves while the others stand by.
// Store clients (the C API with an etcd:// address) go on when the leader
// is killed or paused: they reconnect to the next leader within the lease
// and a second, no acknowledged write is lost, and N adds of 1 get exactly
// 1..N. A paused leader that wakes answers nothing.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cc/cc.h"
#include "tests/common/child_process.hpp"
#include "tests/common/free_port.hpp"
#include "tests/etcd/elected_daemons.hpp"
#include "tests/etcd/etcd_test.hpp"

namespace {

using cc::test::ChildOptions;
using cc::test::ChildProcess;
using cc::test::Clock;
using std::chrono::milliseconds;

constexpr int kLeaseMs = 2000;

using cc::test::Daemon;
using cc::test::leader_port;
using cc::test::wait_leader;

Daemon& by_port(std::vector<Daemon>& daemons, int port) {
  for (Daemon& d : daemons)
    if (d.port == port) return d;
  FAIL("no daemon on port " << port);
  return daemons[0];
}

cc_store_t connect(const cc::test::EtcdCluster& cluster, const std::string& prefix,
                   const std::string& job) {
  setenv("CC_ETCD_PREFIX", prefix.c_str(), 1);
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 15000;
  cc_store_t store = nullptr;
  const cc_result_t r = cc_store_connect(&store, cluster.address().c_str(), 0, job.c_str(), &config);
  INFO(cc_last_error());
  REQUIRE(r == CC_SUCCESS);
  return store;
}

std::string get(cc_store_t s, const std::string& key) {
  char buf[256];
  size_t len = 0;
  const cc_result_t r = cc_store_get(s, key.c_str(), buf, sizeof buf, &len, 10000);
  INFO(cc_last_error());
  REQUIRE(r == CC_SUCCESS);
  return std::string(buf, len);
}

void set(cc_store_t s, const std::string& key, const std::string& value) {
  const cc_result_t r = cc_store_set(s, key.c_str(), value.data(), value.size());
  INFO(cc_last_error());
  REQUIRE(r == CC_SUCCESS);
}

}  // namespace

TEST_CASE("daemons: one leads; killed, the next serves the same store within the lease") {
  auto cluster = cc::test::start_cluster(cc::test::members(3));
  const std::string prefix = "daemons-kill";
  std::vector<Daemon> daemons = cc::test::start_daemons(*cluster, prefix, 2, "info");
  const int first = wait_leader(*cluster, prefix, 0, milliseconds(15000));
  REQUIRE(first != 0);

  cc_store_t store = connect(*cluster, prefix, "job-a");
  set(store, "ckpt", "step-100");
  for (int i = 0; i < 20; ++i) set(store, "k" + std::to_string(i), std::to_string(i));

  const auto killed = Clock::now();
  REQUIRE(::kill(by_port(daemons, first).process->pid(), SIGKILL) == 0);
  // The client goes on: its next calls reach the next leader.
  CHECK(get(store, "ckpt") == "step-100");
  const long long resumed_ms = cc::test::ms_since(killed);
  CHECK(resumed_ms < kLeaseMs + 1000 + 2000);  // the lease, a second, and slack for a busy machine
  for (int i = 0; i < 20; ++i) CHECK(get(store, "k" + std::to_string(i)) == std::to_string(i));
  set(store, "after", "yes");
  const int second = wait_leader(*cluster, prefix, first, milliseconds(1000));
  CHECK(second != 0);
  CHECK(second != first);
  std::printf("daemons: the client resumed on the next leader %lld ms after the kill\n",
              resumed_ms);
  cc_store_close(store);

  // A new client finds the new leader.
  cc_store_t again = connect(*cluster, prefix, "job-a");
  CHECK(get(again, "after") == "yes");
  cc_store_close(again);
}

TEST_CASE("daemons: adds of 1 under a leader kill get exactly 1..N, each once") {
  auto cluster = cc::test::start_cluster(cc::test::members(3));
  const std::string prefix = "daemons-adds";
  std::vector<Daemon> daemons = cc::test::start_daemons(*cluster, prefix, 3, "info");
  const int first = wait_leader(*cluster, prefix, 0, milliseconds(15000));
  REQUIRE(first != 0);

  constexpr int kClients = 16, kAdds = 60;
  std::vector<cc_store_t> stores;
  for (int i = 0; i < kClients; ++i) stores.push_back(connect(*cluster, prefix, "job-adds"));
  std::mutex mu;
  std::vector<int64_t> results;
  std::atomic<int> failures{0};
  std::string failure;
  std::vector<std::thread> adders;
  for (int i = 0; i < kClients; ++i) {
    adders.emplace_back([&, i] {
      for (int k = 0; k < kAdds; ++k) {
        int64_t total = 0;
        if (cc_store_add(stores[static_cast<size_t>(i)], "n", 1, &total) != CC_SUCCESS) {
          std::lock_guard<std::mutex> lock(mu);
          ++failures;
          failure = cc_last_error();
          continue;
        }
        std::lock_guard<std::mutex> lock(mu);
        results.push_back(total);
      }
    });
  }
  std::this_thread::sleep_for(milliseconds(300));
  REQUIRE(::kill(by_port(daemons, first).process->pid(), SIGKILL) == 0);
  for (auto& t : adders) t.join();
  INFO(failure);
  CHECK(failures == 0);
  std::set<int64_t> seen(results.begin(), results.end());
  CHECK(seen.size() == results.size());  // no total twice
  CHECK(results.size() == size_t{kClients} * kAdds);
  CHECK(*seen.begin() == 1);
  CHECK(*seen.rbegin() == int64_t{kClients} * kAdds);
  for (cc_store_t s : stores) cc_store_close(s);
}

TEST_CASE("daemons: a paused leader is deposed; awake, it answers nothing and writes nothing") {
  auto cluster = cc::test::start_cluster(cc::test::members(1));
  const std::string prefix = "daemons-pause";
  std::vector<Daemon> daemons = cc::test::start_daemons(*cluster, prefix, 2, "info");
  const int first = wait_leader(*cluster, prefix, 0, milliseconds(15000));
  REQUIRE(first != 0);
  cc_store_t store = connect(*cluster, prefix, "job-p");
  set(store, "v", "1");

  const pid_t paused = by_port(daemons, first).process->pid();
  REQUIRE(::kill(paused, SIGSTOP) == 0);
  set(store, "v", "2");  // on the next leader
  const int second = wait_leader(*cluster, prefix, first, milliseconds(10000));
  REQUIRE(second != 0);
  std::this_thread::sleep_for(milliseconds(kLeaseMs));
  REQUIRE(::kill(paused, SIGCONT) == 0);

  // A client that still dials the old leader is closed unanswered.
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 3000;
  cc_store_t stale = nullptr;
  const std::string old_addr = "127.0.0.1";
  std::this_thread::sleep_for(milliseconds(300));
  const cc_result_t r = cc_store_connect(&stale, ("tcp://" + old_addr + ":" + std::to_string(first)).c_str(), 0,
                                         "job-p", &config);
  if (r == CC_SUCCESS) {
    // It may have campaigned again and now stand by: it must not serve.
    char buf[8];
    size_t len = 0;
    CHECK(cc_store_get(stale, "v", buf, sizeof buf, &len, 0) != CC_SUCCESS);
    cc_store_close(stale);
  }
  CHECK(get(store, "v") == "2");
  cc_store_close(store);
}
