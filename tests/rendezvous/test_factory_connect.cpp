// The factory (rendezvous/factory/connect.hpp) for cc's own server: a host
// with its port apart and tcp://host:port make the same client, which serves
// the store and the membership, says its message as cc's server's, and names
// where it is when nobody answers. The etcd form: tests/etcd/test_factory_etcd.cpp.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "rendezvous/factory/connect.hpp"
#include "rendezvous/server.hpp"
#include "tests/common/free_port.hpp"
#include "tests/rendezvous/factory_checks.hpp"

namespace factory = cc::rv::factory;
using std::chrono::milliseconds;

namespace {

factory::Address address_of(const std::string& text, int port) {
  factory::Address a;
  const cc::Status s = factory::parse_address(text, port, &a);
  INFO(s.message);
  REQUIRE(s.ok());
  return a;
}

factory::Options options(const std::string& job) {
  factory::Options o;
  o.job_id = job;
  o.client = "test_factory_connect";
  o.connect_timeout = milliseconds(5000);
  o.request_timeout = milliseconds(5000);
  return o;
}

std::unique_ptr<cc::rv::Server> start_server(const std::string& token = {}) {
  cc::rv::ServerOptions so;
  so.bind_addr = "127.0.0.1";
  so.token = token;
  std::unique_ptr<cc::rv::Server> server;
  const cc::Status s = cc::rv::Server::start(so, &server);
  INFO(s.message);
  REQUIRE(s.ok());
  return server;
}

}  // namespace

TEST_CASE("factory: a host and its port, and tcp://host:port, reach cc's server") {
  const auto server = start_server();
  const int port = server->port();
  const std::string at = "127.0.0.1:" + std::to_string(port);
  const std::string job = "factory-" + std::to_string(::getpid());
  const factory::Address host = address_of("127.0.0.1", port);
  const factory::Address tcp = address_of("tcp://" + at, 0);

  std::unique_ptr<cc::rv::Client> by_host, by_tcp;
  REQUIRE(factory::connect_client(host, options(job), &by_host).ok());
  REQUIRE(factory::connect_client(tcp, options(job), &by_tcp).ok());
  for (cc::rv::Client* c : {by_host.get(), by_tcp.get()}) {
    CHECK(c->endpoint() == at);
    CHECK(c->named() == "the rendezvous server at " + at);
    CHECK(c->lost_advice() == "look at cc-run or cc-rendezvous");
  }
  // One server, one job: what one form writes the other reads.
  cc::test::check_store_round_trip(*by_host, *by_tcp, "shared");
  cc::test::check_join_alone(*by_tcp, 1);

  // A store alone, as cc_store_connect holds it.
  std::unique_ptr<cc::rv::Store> store;
  REQUIRE(factory::connect_store(tcp, options(job), &store).ok());
  CHECK(store->endpoint() == at);
  std::vector<uint8_t> got;
  REQUIRE(store->get("shared", &got, 0).ok());
  CHECK(got == std::vector<uint8_t>{'v', '1'});
}

TEST_CASE("factory: the token reaches cc's server") {
  const auto server = start_server("factory-token");
  const factory::Address tcp = address_of("tcp://127.0.0.1:" + std::to_string(server->port()), 0);
  std::unique_ptr<cc::rv::Store> store;
  const cc::Status refused = factory::connect_store(tcp, options("auth"), &store);
  CHECK(refused.code == CC_ERR_AUTH);
  factory::Options with = options("auth");
  with.token = "factory-token";
  CHECK(factory::connect_store(tcp, with, &store).ok());
}

TEST_CASE("factory: nobody at a tcp:// address is named, within the connect timeout") {
  const int port = cc::test::free_port();
  const factory::Address tcp = address_of("tcp://127.0.0.1:" + std::to_string(port), 0);
  factory::Options o = options("nobody");
  o.connect_timeout = milliseconds(300);
  std::unique_ptr<cc::rv::Store> store;
  const cc::Status s = factory::connect_store(tcp, o, &store);
  INFO(s.message);
  CHECK(s.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(s.message, Catch::StartsWith("cannot reach the rendezvous at 127.0.0.1:" +
                                          std::to_string(port) + " after ") &&
                            Catch::Contains("connection refused"));
  CHECK(store == nullptr);
}
