// The factory (rendezvous/factory/connect.hpp) for an etcd address: it loads
// the etcd backend's plugin (found on LD_LIBRARY_PATH here), which serves the
// store and the membership with etcd's words, and takes the CC_ETCD_*
// settings the options carry. cc's server's forms:
// tests/rendezvous/test_factory_connect.cpp.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "rendezvous/factory/connect.hpp"
#include "tests/etcd/etcd_test.hpp"
#include "tests/rendezvous/factory_checks.hpp"

namespace factory = cc::rv::factory;
using std::chrono::milliseconds;

namespace {

factory::Address address_of(const std::string& text) {
  factory::Address a;
  const cc::Status s = factory::parse_address(text, 29500, &a);
  INFO(s.message);
  REQUIRE(s.ok());
  return a;
}

// The job's options; `prefix` for CC_ETCD_PREFIX.
factory::Options options(const std::string& job, const std::string& prefix = "factory") {
  factory::Options o;
  o.job_id = job + "-" + std::to_string(::getpid());
  o.connect_timeout = milliseconds(5000);
  o.request_timeout = milliseconds(5000);
  o.getenv = [prefix](const char* name) -> const char* {
    return std::string(name) == "CC_ETCD_PREFIX" ? prefix.c_str() : nullptr;
  };
  return o;
}

}  // namespace

TEST_CASE("factory: an etcd address makes the etcd backend, store and membership") {
  const std::string text = cc::test::shared_cluster().address();
  const factory::Address etcd = address_of(text);

  factory::Options member = options("members");
  member.heartbeat_window = milliseconds(3000);  // a membership lease, taken at connect
  std::unique_ptr<cc::rv::Client> client;
  cc::Status s = factory::connect_client(etcd, member, &client);
  INFO(s.message);
  REQUIRE(s.ok());
  CHECK(client->endpoint() == text);
  CHECK(client->named() == "the job's etcd rendezvous (" + text + ")");
  CHECK(client->lost_advice() ==
        "check the cluster ('etcdctl endpoint status --cluster') and this host's network");

  std::unique_ptr<cc::rv::Store> store;
  s = factory::connect_store(etcd, options("members"), &store);
  INFO(s.message);
  REQUIRE(s.ok());
  CHECK(store->endpoint() == text);
  cc::test::check_store_round_trip(*client, *store, "shared");
  cc::test::check_join_alone(*client, 1);
}

TEST_CASE("factory: the CC_ETCD_* settings reach the etcd backend") {
  const factory::Address etcd = address_of(cc::test::shared_cluster().address());
  std::unique_ptr<cc::rv::Store> a, b;
  REQUIRE(factory::connect_store(etcd, options("prefixed", "factory-a"), &a).ok());
  REQUIRE(factory::connect_store(etcd, options("prefixed", "factory-b"), &b).ok());
  const std::vector<uint8_t> one{'1'};
  REQUIRE(a->set("k", one).ok());
  // The same job under another key prefix is another store.
  std::vector<uint8_t> got;
  CHECK(b->get("k", &got, 0).code == CC_ERR_TIMEOUT);
  REQUIRE(a->get("k", &got, 0).ok());
  CHECK(got == one);
}
