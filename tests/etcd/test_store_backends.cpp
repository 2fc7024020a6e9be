// The store cases (store_cases.cpp) on every backend: cc's own server, and
// etcd with one member and with three.
#include <catch2/catch.hpp>

#include "rendezvous/etcd/backend.hpp"
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

template <int Members>
class EtcdStore final : public StoreBackend {
 public:
  static EtcdStore& instance() {
    static EtcdStore one;
    return one;
  }
  std::string name() const override { return "etcd (" + std::to_string(Members) + " members)"; }
  std::unique_ptr<cc::rv::Client> connect(const std::string& job) override {
    cc::rv::etcd::BackendOptions o;
    o.address = cluster_->address();
    o.job_id = job;
    o.prefix = "store-cases";
    o.connect_timeout = milliseconds(5000);
    o.request_timeout = milliseconds(5000);
    std::unique_ptr<cc::rv::etcd::Backend> c;
    const cc::Status s = cc::rv::etcd::Backend::connect(o, &c);
    INFO(s.message);
    REQUIRE(s.ok());
    return c;
  }
  bool has_compare_set() const override { return true; }
  cc::Status compare_set(cc::rv::Client& c, const std::string& key,
                         const std::vector<uint8_t>* expected, std::span<const uint8_t> desired,
                         bool* swapped) override {
    return dynamic_cast<cc::rv::etcd::Backend&>(c).compare_set(key, expected, desired, swapped);
  }

 private:
  EtcdStore() : cluster_(cc::test::start_cluster(cc::test::members(Members))) {}
  std::unique_ptr<EtcdCluster> cluster_;
};

using EtcdOne = EtcdStore<1>;
using EtcdThree = EtcdStore<3>;

}  // namespace

// Each store case (store_cases.hpp), a test case on the backends listed: compare-set
// only where the backend has it.
#define STORE_CASE(title, run, ...)                             \
  TEMPLATE_TEST_CASE("store: " title, "[store]", __VA_ARGS__) { \
    cc::test::run(TestType::instance());                        \
  }

#define ALL_STORES TcpStore, EtcdOne, EtcdThree
STORE_CASE("set, get, add and wait", store_case_set_get_add_wait, ALL_STORES)
STORE_CASE("deadlines and their words", store_case_deadlines_and_words, ALL_STORES)
STORE_CASE("binary, large and replaced values", store_case_values, ALL_STORES)
STORE_CASE("add refuses text and overflow", store_case_add_refusals, ALL_STORES)
STORE_CASE("delete", store_case_delete, ALL_STORES)
STORE_CASE("jobs keep apart", store_case_jobs_apart, ALL_STORES)
STORE_CASE("concurrent adders lose nothing", store_case_concurrent_adders, ALL_STORES)
STORE_CASE("add after set, with set and delete between", store_case_add_with_set_and_delete,
           ALL_STORES)
STORE_CASE("an add wakes a get and a wait", store_case_add_wakes_waiters, ALL_STORES)
STORE_CASE("128 concurrent adds of 1 return exactly 1..128", store_case_concurrent_adds_exact,
           ALL_STORES)
STORE_CASE("compare-set", store_case_compare_set, EtcdOne, EtcdThree)
STORE_CASE("64 racing compare-sets have exactly one winner", store_case_racing_compare_sets,
           EtcdOne, EtcdThree)
