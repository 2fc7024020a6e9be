// The factory's address (rendezvous/factory/address.hpp): every form a user
// may write, what each answers to the questions the rest of cc asks, and the
// exact message for each malformed one; the etcd election's options from the
// CC_ETCD_* settings. No sockets: connecting is the rendezvous and etcd
// suites' part (test_factory_connect.cpp, test_store_backends.cpp).
#include <catch2/catch.hpp>
#include <string>

#include "rendezvous/factory/address.hpp"
#include "rendezvous/factory/etcd_options.hpp"
#include "tests/unit/fake_env.hpp"

namespace factory = cc::rv::factory;
using Catch::Contains;
using cc::test::FakeEnv;

namespace {

factory::Address parsed(const std::string& text, int port = 0) {
  factory::Address a;
  const cc::Status s = factory::parse_address(text, port, &a);
  INFO(text << ": " << s.message);
  REQUIRE(s.ok());
  return a;
}

// The message parse_address refuses `text` with (CC_ERR_INVALID_ARGUMENT).
std::string refused(const std::string& text) {
  factory::Address a;
  const cc::Status s = factory::parse_address(text, &a);
  INFO(text << ": " << s.message);
  CHECK(s.code == CC_ERR_INVALID_ARGUMENT);
  return s.message;
}

constexpr const char* kForms =
    "write a host name or address (with its port apart, as MASTER_PORT), tcp://host:port, or "
    "etcd://host:port[,host:port...] (etcds:// for TLS)";
constexpr const char* kTcpForm = "write it as tcp://host:port ([v6]:port for IPv6)";

}  // namespace

TEST_CASE("factory address: a host alone is cc's server, its port given apart") {
  factory::Address a = parsed("10.0.0.1", 29500);
  CHECK(a.needs_port());
  REQUIRE(a.server());
  CHECK(a.server()->host == "10.0.0.1");
  CHECK(a.server()->port == 29500);
  CHECK(std::string(a.server()->any()) == "0.0.0.0");
  CHECK(a.where() == "10.0.0.1:29500");
  CHECK(a.route_host() == "10.0.0.1");
  CHECK(a.text() == "10.0.0.1");

  // Rank 0 reaches the server it hosts over its loopback, port and all.
  const factory::Address own = a.on_loopback();
  CHECK_FALSE(own.needs_port());
  CHECK(own.where() == "127.0.0.1:29500");
  CHECK(own.text() == "tcp://127.0.0.1:29500");
  CHECK(own.route_host() == "127.0.0.1");

  // The port can come after the parse (MASTER_PORT is read only when needed).
  factory::Address later = parsed("node-a.example.com");
  CHECK(later.where() == "node-a.example.com:0");
  later.set_port(6000);
  CHECK(later.where() == "node-a.example.com:6000");

  // IPv6, with or without brackets; a zone is kept.
  const factory::Address v6 = parsed("[::1]", 7000);
  CHECK(v6.server()->host == "::1");
  CHECK(v6.where() == "[::1]:7000");
  CHECK(std::string(v6.server()->any()) == "::");
  CHECK(v6.on_loopback().text() == "tcp://[::1]:7000");
  CHECK(parsed("fe80::1%eth0", 1).server()->host == "fe80::1%eth0");
  CHECK(parsed("localhost", 1).route_host() == "localhost");
}

TEST_CASE("factory address: tcp://host:port carries its port") {
  factory::Address a = parsed("tcp://node-a:5000");
  CHECK_FALSE(a.needs_port());
  a.set_port(7);  // MASTER_PORT does not override it
  REQUIRE(a.server());
  CHECK(a.server()->host == "node-a");
  CHECK(a.server()->port == 5000);
  CHECK(a.where() == "node-a:5000");
  CHECK(a.route_host() == "node-a");
  CHECK(a.on_loopback().where() == "127.0.0.1:5000");

  CHECK(parsed("TCP://10.1.2.3:29500/").where() == "10.1.2.3:29500");
  const factory::Address v6 = parsed("tcp://[fd00::7]:1234");
  CHECK(v6.server()->host == "fd00::7");
  CHECK(v6.where() == "[fd00::7]:1234");
  CHECK(v6.on_loopback().where() == "[::1]:1234");
}

TEST_CASE("factory address: an etcd cluster names no server: its election does") {
  const factory::Address a = parsed("etcds://node-a:2379,node-b:2379", 29500);
  CHECK_FALSE(a.needs_port());
  CHECK_FALSE(a.server());
  CHECK(a.route_host() == "node-a");  // the first endpoint stands for all
  CHECK(a.where() == "etcds://node-a:2379,node-b:2379");
  CHECK(a.text() == "etcds://node-a:2379,node-b:2379");
  CHECK(parsed("etcd://[::1]:2379").route_host() == "::1");
}

TEST_CASE("factory address: each malformed address in words") {
  const std::string bad = "the rendezvous address ";
  CHECK(refused("") == bad + "'' is empty: " + kForms);
  CHECK(refused("http://h:1") ==
        bad + "'http://h:1' has the scheme 'http://', which cc does not know: " + kForms);
  CHECK(refused("unix:///run/cc.sock") ==
        bad + "'unix:///run/cc.sock' has the scheme 'unix://', which cc does not know: " + kForms);
  CHECK(refused("node-a:29500") == bad +
                                       "'node-a:29500' has a port in it: write tcp://node-a:29500, "
                                       "or the host alone with its port apart (MASTER_PORT)");
  CHECK(refused("my host") == bad + "'my host' is not a host name or address: " + kForms);
  CHECK(refused("h/path") == bad + "'h/path' is not a host name or address: " + kForms);
  CHECK(refused("[]") == bad + "'[]' is not a host name or address: " + kForms);

  CHECK(refused("tcp://") == bad + "'tcp://' names no host: " + kTcpForm);
  CHECK(refused("tcp://h") == bad + "'tcp://h' has no port: " + kTcpForm);
  CHECK(refused("tcp://:5") == bad + "'tcp://:5' names no host: " + kTcpForm);
  CHECK(refused("tcp://h:0") ==
        bad + "'tcp://h:0' has the port '0', not a number in 1..65535: " + kTcpForm);
  CHECK(refused("tcp://h:65536") == bad +
                                        "'tcp://h:65536' has the port '65536', not a number in "
                                        "1..65535: " +
                                        kTcpForm);
  CHECK(refused("tcp://h:1/x") ==
        bad + "'tcp://h:1/x' has the port '1/x', not a number in 1..65535: " + kTcpForm);
  CHECK(refused("tcp://a:1,b:2") == bad +
                                        "'tcp://a:1,b:2' names more than one host: cc's server is "
                                        "one host and port; a list of endpoints is for etcd://");
  CHECK(refused("tcp://::1:5") ==
        bad + "'tcp://::1:5' has an IPv6 address without brackets: write tcp://[::1]:29500");
  CHECK(refused("tcp://[::1:5") == bad + "'tcp://[::1:5' has '[' but no ']': " + kTcpForm);
  CHECK(refused("tcp://[h]:5") ==
        bad + "'tcp://[h]:5' has brackets that hold no IPv6 address: " + kTcpForm);
  CHECK(refused("tcp://[::1]") == bad + "'tcp://[::1]' has no port: " + kTcpForm);
  CHECK(refused("tcp://user@h:1") == bad +
                                         "'tcp://user@h:1' has a host that is not a name or an "
                                         "address (a path or user part does not belong in it): " +
                                         kTcpForm);

  // An etcd address is the etcd parser's, with its message.
  CHECK(refused("etcd://h") ==
        "the etcd address 'etcd://h' has endpoint 'h' without a port (etcd's client port is "
        "usually 2379); write it as etcd://host:port[,host:port...] (etcds:// for TLS)");
}

namespace {

cc::Status etcd_options(const std::string& text, const FakeEnv& env,
                        cc::rv::etcd::ElectionOptions* out) {
  factory::Address address;
  if (cc::Status s = factory::parse_address(text, &address); !s.ok()) return s;
  factory::Options o;
  o.job_id = "job-7";
  o.connect_timeout = std::chrono::milliseconds(1234);
  o.request_timeout = std::chrono::milliseconds(567);
  o.lease = std::chrono::milliseconds(3000);
  o.getenv = env.getenv();
  return factory::etcd_options(address, o, out);
}

}  // namespace

TEST_CASE("factory etcd options: the endpoints, deadlines, lease and CC_ETCD_* settings") {
  FakeEnv env{{{"CC_ETCD_AUTH_FILE", "/secrets/etcd-user"}, {"CC_ETCD_PREFIX", "team-a/cc"}}};
  cc::rv::etcd::ElectionOptions o;
  const cc::Status s = etcd_options("etcd://127.0.0.1:2379", env, &o);
  INFO(s.message);
  REQUIRE(s.ok());
  CHECK(o.client.address.text() == "etcd://127.0.0.1:2379");
  CHECK(o.request_timeout.count() == 567);
  CHECK(o.lease.count() == 3000);
  CHECK(o.client.auth_file == "/secrets/etcd-user");
  CHECK(o.prefix == "team-a/cc");
  CHECK(o.client.ca_file.empty());

  REQUIRE(etcd_options("etcd://h:1", FakeEnv{}, &o).ok());
  CHECK(o.prefix == "cc");
  CHECK(o.client.auth_file.empty());

  FakeEnv tls{{{"CC_ETCD_CA_FILE", "/ca.pem"},
               {"CC_ETCD_CERT_FILE", "/c.pem"},
               {"CC_ETCD_KEY_FILE", "/k.pem"}}};
  REQUIRE(etcd_options("etcds://h:1", tls, &o).ok());
  CHECK(o.client.ca_file == "/ca.pem");
  CHECK(o.client.cert_file == "/c.pem");
  CHECK(o.client.key_file == "/k.pem");
  CHECK(o.client.address.tls);
  cc::Status plain = etcd_options("etcd://h:1", tls, &o);
  CHECK(plain.code == CC_ERR_INVALID_ARGUMENT);
  CHECK(plain.message ==
        "a CA or client certificate is set (CC_ETCD_CA_FILE, CC_ETCD_CERT_FILE) but the "
        "rendezvous address etcd://h:1 is plain HTTP: write etcds:// for TLS, or unset them");

  cc::Status empty = etcd_options("etcd://h:1", FakeEnv{{{"CC_ETCD_PREFIX", ""}}}, &o);
  CHECK(empty.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(empty.message, Contains("CC_ETCD_PREFIX='' is empty"));
}
