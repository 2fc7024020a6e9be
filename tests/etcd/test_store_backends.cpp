// The store cases (store_cases.cpp) on each way to cc's server: its store in
// memory; its store kept in etcd (the server started with a leadership, one
// etcd member and three); and through an etcd:// address, where this test
// process is elected to host the job's server.
#include <catch2/catch.hpp>

#include "rendezvous/etcd/election.hpp"
#include "rendezvous/factory/connect.hpp"
#include "rendezvous/server.hpp"
#include "tests/etcd/etcd_test.hpp"
#include "tests/etcd/store_cases.hpp"
#include "tests/rendezvous/loopback_client.hpp"

namespace {

using cc::test::EtcdCluster;
using cc::test::StoreBackend;
using std::chrono::milliseconds;

class TcpStore final : public StoreBackend {
 public:
  static TcpStore& instance() {
    static TcpStore one;
    return one;
  }
  std::string name() const override { return "cc-rendezvous"; }
  std::unique_ptr<cc::rv::Client> connect(const std::string& job) override {
    return cc::test::loopback_client(server_->port(), job);
  }

 private:
  TcpStore() {
    cc::rv::ServerOptions o;
    o.bind_addr = "127.0.0.1";
    const cc::Status s = cc::rv::Server::start(o, &server_);
    if (!s.ok()) FAIL(s.message);
  }
  std::unique_ptr<cc::rv::Server> server_;
};

// cc's server leading in etcd's election, every store write kept there.
template <int Members>
class DurableStore final : public StoreBackend {
 public:
  static DurableStore& instance() {
    static DurableStore one;
    return one;
  }
  std::string name() const override {
    return "cc-rendezvous kept in etcd (" + std::to_string(Members) + " members)";
  }
  std::unique_ptr<cc::rv::Client> connect(const std::string& job) override {
    return cc::test::loopback_client(server_->port(), job);
  }

 private:
  DurableStore() : cluster_(cc::test::start_cluster(cc::test::members(Members))) {
    cc::rv::etcd::ElectionOptions eo;
    REQUIRE(cc::rv::etcd::parse_address(cluster_->address(), &eo.client.address).ok());
    eo.prefix = "store-cases";
    std::unique_ptr<cc::rv::Election> election;
    cc::Status s = cc::rv::etcd::open_election(eo, cc::test::Clock::now() + milliseconds(10000),
                                               &election);
    INFO(s.message);
    REQUIRE(s.ok());
    std::unique_ptr<cc::rv::Leadership> won;
    s = election->campaign("", "127.0.0.1:1", cc::test::Clock::now() + milliseconds(10000), &won);
    REQUIRE(s.ok());
    REQUIRE(won);
    leadership_ = std::move(won);
    cc::rv::ServerOptions o;
    o.bind_addr = "127.0.0.1";
    o.durable = leadership_;
    s = cc::rv::Server::start(o, &server_);
    REQUIRE(s.ok());
    election_ = std::move(election);
  }
  std::unique_ptr<EtcdCluster> cluster_;
  std::unique_ptr<cc::rv::Election> election_;
  std::shared_ptr<cc::rv::Leadership> leadership_;
  std::unique_ptr<cc::rv::Server> server_;
};

// An etcd:// address, as cc_store_connect takes it: the first client of a
// job campaigns and hosts its server here.
class ElectedStore final : public StoreBackend {
 public:
  static ElectedStore& instance() {
    static ElectedStore one;
    return one;
  }
  std::string name() const override { return "etcd:// (this process elected)"; }
  std::unique_ptr<cc::rv::Client> connect(const std::string& job) override {
    cc::rv::factory::Address address;
    REQUIRE(cc::rv::factory::parse_address(cluster_.address(), &address).ok());
    cc::rv::factory::Options o;
    o.job_id = job;
    o.connect_timeout = milliseconds(10000);
    o.request_timeout = milliseconds(5000);
    std::unique_ptr<cc::rv::Client> c;
    const cc::Status s = cc::rv::factory::connect_client(address, o, &c);
    INFO(s.message);
    REQUIRE(s.ok());
    return c;
  }

 private:
  ElectedStore() : cluster_(cc::test::shared_cluster()) {}
  EtcdCluster& cluster_;
};

using DurableOne = DurableStore<1>;
using DurableThree = DurableStore<3>;

}  // namespace

// Each store case (store_cases.hpp), a test case on each way.
#define STORE_CASE(title, run)                                                             \
  TEMPLATE_TEST_CASE("store: " title, "[store]", TcpStore, DurableOne, DurableThree, \
                     ElectedStore) {                                                       \
    cc::test::run(TestType::instance());                                                   \
  }

STORE_CASE("set, get, add and wait", store_case_set_get_add_wait)
STORE_CASE("deadlines and their words", store_case_deadlines_and_words)
STORE_CASE("binary, large and replaced values", store_case_values)
STORE_CASE("add refuses text and overflow", store_case_add_refusals)
STORE_CASE("delete", store_case_delete)
STORE_CASE("jobs keep apart", store_case_jobs_apart)
STORE_CASE("concurrent adders lose nothing", store_case_concurrent_adders)
STORE_CASE("add after set, with set and delete between", store_case_add_with_set_and_delete)
STORE_CASE("an add wakes a get and a wait", store_case_add_wakes_waiters)
STORE_CASE("128 concurrent adds of 1 return exactly 1..128", store_case_concurrent_adds_exact)
STORE_CASE("compare-set", store_case_compare_set)
STORE_CASE("64 racing compare-sets have exactly one winner", store_case_racing_compare_sets)
