// The store's C API (cc_store_connect and the calls on its handle) with an
// etcd address, against a real one-member etcd cluster, and the same cases
// against cc's own server: the same results and the same message, whichever
// backend the address names. libcc reaches etcd through its plugin
// (libcc-etcd.so, found on the loader's path: the test sets LD_LIBRARY_PATH).
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cc/cc.h"
#include "tests/common/child_process.hpp"
#include "tests/etcd/etcd_test.hpp"
#include "tests/rendezvous/store_api_cases.hpp"

using namespace cc::test;
using std::chrono::milliseconds;

namespace {

std::string last_error() { return cc_last_error(); }

// cc's own server on 127.0.0.1 for the whole run.
int shared_server_port() {
  static int port = [] {
    cc_server_t server = nullptr;
    REQUIRE(cc_server_start(&server, "127.0.0.1", 0, nullptr) == CC_SUCCESS);
    int p = 0;
    REQUIRE(cc_server_port(server, &p) == CC_SUCCESS);
    return p;  // stops with the process
  }();
  return port;
}

// Where a case runs: cc's server (host and port) or etcd (address, port 0).
struct Target {
  std::string name;
  std::string addr;
  int port = 0;
  // How the store's messages name it.
  std::string where() const { return port != 0 ? addr + ":" + std::to_string(port) : addr; }
};

std::vector<Target> targets() {
  return {{"cc's server", "127.0.0.1", shared_server_port()},
          {"etcd", shared_cluster().address(), 0}};
}

// Jobs unique to one run of one case on one target.
std::string job(const Target& t, const std::string& stem) {
  static std::atomic<int> n{0};
  return stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++) +
         (t.port != 0 ? "-cc" : "-etcd");
}

cc_store_t connect(const Target& t, const std::string& job_id, int timeout_ms = 5000) {
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = timeout_ms;
  cc_store_t store = nullptr;
  const cc_result_t r = cc_store_connect(&store, t.addr.c_str(), t.port, job_id.c_str(), &config);
  INFO(t.name << ": " << last_error());
  REQUIRE(r == CC_SUCCESS);
  REQUIRE(store != nullptr);
  return store;
}

// A new job on the target for the shared store API cases.
StoreApiTarget cases_target(const Target& t, const std::string& stem) {
  return {[t, j = job(t, stem)] { return connect(t, j); }, t.where()};
}

}  // namespace

TEST_CASE("store API on etcd and on cc's server: set, get, add, wait, a get that waits") {
  for (const Target& t : targets()) {
    SECTION(t.name) { store_api_case_basics(cases_target(t, "basic")); }
  }
}

TEST_CASE("store API on etcd and on cc's server: timeouts name the keys and the rendezvous") {
  for (const Target& t : targets()) {
    SECTION(t.name) { store_api_case_deadlines(cases_target(t, "deadlines")); }
  }
}

TEST_CASE("store API on etcd and on cc's server: a buffer too small reports the length") {
  for (const Target& t : targets()) {
    SECTION(t.name) { store_api_case_small_buffer(cases_target(t, "buffer")); }
  }
}

TEST_CASE("store API on etcd and on cc's server: delete, compare-set, keys outlive connections") {
  for (const Target& t : targets()) {
    SECTION(t.name) {
      const std::string j = job(t, "keep");
      cc_store_t s = connect(t, j);
      int swapped = -1;
      // create-if-absent, then a compare on the value
      REQUIRE(cc_store_compare_set(s, "leader", nullptr, 0, "r0", 2, &swapped) == CC_SUCCESS);
      CHECK(swapped == 1);
      REQUIRE(cc_store_compare_set(s, "leader", nullptr, 0, "r1", 2, &swapped) == CC_SUCCESS);
      CHECK(swapped == 0);
      REQUIRE(cc_store_compare_set(s, "leader", "r1", 2, "r2", 2, &swapped) == CC_SUCCESS);
      CHECK(swapped == 0);
      REQUIRE(cc_store_compare_set(s, "leader", "r0", 2, "r3", 2, &swapped) == CC_SUCCESS);
      CHECK(swapped == 1);
      // an empty expected value never matches an absent key
      REQUIRE(cc_store_compare_set(s, "nobody", "", 0, "x", 1, &swapped) == CC_SUCCESS);
      CHECK(swapped == 0);
      REQUIRE(cc_store_set(s, "gone", "1", 1) == CC_SUCCESS);
      REQUIRE(cc_store_delete(s, "gone") == CC_SUCCESS);
      REQUIRE(cc_store_delete(s, "never-was") == CC_SUCCESS);
      char buf[8];
      size_t len = 0;
      CHECK(cc_store_get(s, "gone", buf, sizeof(buf), &len, 0) == CC_ERR_TIMEOUT);
      int64_t v = 0;
      REQUIRE(cc_store_add(s, "counter", 100, &v) == CC_SUCCESS);
      CHECK(cc_store_close(s) == CC_SUCCESS);

      // a new connection to the same job reads what the last one wrote
      cc_store_t again = connect(t, j);
      REQUIRE(cc_store_add(again, "counter", 0, &v) == CC_SUCCESS);
      CHECK(v == 100);
      REQUIRE(cc_store_get(again, "leader", buf, sizeof(buf), &len, 0) == CC_SUCCESS);
      CHECK(std::string(buf, len) == "r3");
      CHECK(cc_store_close(again) == CC_SUCCESS);
    }
  }
}

TEST_CASE("store API on etcd and on cc's server: 16 racing compare-sets, one winner") {
  for (const Target& t : targets()) {
    SECTION(t.name) {
      const std::string j = job(t, "race");
      constexpr int kRacers = 16;
      std::vector<cc_store_t> stores;
      for (int i = 0; i < kRacers; ++i) stores.push_back(connect(t, j, 20000));
      std::atomic<int> winners{0}, errors{0};
      std::vector<std::thread> threads;
      for (int i = 0; i < kRacers; ++i) {
        threads.emplace_back([&, i] {
          const std::string me = "racer-" + std::to_string(i);
          int swapped = 0;
          if (cc_store_compare_set(stores[static_cast<size_t>(i)], "once", nullptr, 0, me.data(),
                                   me.size(), &swapped) != CC_SUCCESS)
            ++errors;
          else if (swapped == 1)
            ++winners;
        });
      }
      for (auto& th : threads) th.join();
      CHECK(errors == 0);
      CHECK(winners == 1);
      for (cc_store_t s : stores) CHECK(cc_store_close(s) == CC_SUCCESS);
    }
  }
}

TEST_CASE("store API on etcd: the port is not used; addresses are checked with words") {
  const std::string address = shared_cluster().address();
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 5000;
  for (int port : {0, -1, 70000}) {
    cc_store_t s = nullptr;
    INFO("port " << port);
    REQUIRE(cc_store_connect(&s, address.c_str(), port, "ports", &config) == CC_SUCCESS);
    CHECK(cc_store_close(s) == CC_SUCCESS);
  }
  cc_store_t s = nullptr;
  CHECK(cc_store_connect(&s, "etcd://127.0.0.1", 0, "bad", &config) == CC_ERR_INVALID_ARGUMENT);
  CHECK(s == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("cc_store_connect") && Catch::Contains("port"));
  CHECK(cc_store_connect(&s, "etcd://", 0, "bad", &config) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("cc_store_connect"));
}

TEST_CASE("store API on etcd: a cluster that is not there fails within the timeout, naming etcd") {
  // A member started and killed: its port is free, nothing listens there.
  auto gone = start_cluster();
  const std::string address = gone->address();
  gone->kill(0);
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 2000;
  cc_store_t s = nullptr;
  const auto t0 = Clock::now();
  const cc_result_t r = cc_store_connect(&s, address.c_str(), 0, "nobody", &config);
  CHECK(r == CC_ERR_RENDEZVOUS);
  CHECK(ms_since(t0) < 2000 + 2500);
  CHECK(s == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("cc_store_connect (job 'nobody')") &&
                               Catch::Contains("etcd") && Catch::Contains(gone->endpoint(0)));
}

TEST_CASE("store API on etcd: a CA for a plain-HTTP address is refused with words") {
  const std::string address = shared_cluster().address();
  ::setenv("CC_ETCD_CA_FILE", "/nonexistent/ca.pem", 1);
  cc_store_t s = nullptr;
  const cc_result_t r = cc_store_connect(&s, address.c_str(), 0, "tls", nullptr);
  ::unsetenv("CC_ETCD_CA_FILE");
  CHECK(r == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("CC_ETCD_CA_FILE") && Catch::Contains("etcds://"));
}

TEST_CASE("cc-doctor with an etcd MASTER_ADDR says whether etcd answers") {
  const char* doctor = std::getenv("CC_DOCTOR");
  REQUIRE(doctor != nullptr);
  // Its stdout and stderr together; killed after 30 s, so the test cannot hang.
  const auto run = [&](const std::string& address) {
    cc::test::ChildOptions o;
    o.args = {doctor, "--timeout-ms", "1500"};
    o.env = {"MASTER_ADDR=" + address};
    o.pipe_stdout = true;
    o.stderr_to_stdout = true;
    cc::test::ChildProcess child(std::move(o));
    std::string out, err;
    child.collect(&out, &err,
                  [](std::chrono::milliseconds since) { return since.count() < 30000; });
    REQUIRE(child.wait_for(std::chrono::seconds(5)));
    return out;
  };
  const std::string address = shared_cluster().address();
  CHECK_THAT(run(address),
             Catch::Contains("the rendezvous at " + address + " answers (job 'default'): nobody "
                             "serves job 'default' yet"));
  // A member started and killed: nothing listens on its port.
  auto gone = start_cluster();
  const std::string dead = gone->address();
  gone->kill(0);
  CHECK_THAT(run(dead),
             Catch::Contains("error: cannot use the rendezvous: etcd at " + gone->endpoint(0)) &&
                 Catch::Contains("etcdctl endpoint status"));
}
