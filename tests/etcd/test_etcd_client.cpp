// The etcd v3 client against real etcd: reads, writes, transactions, leases,
// failover when a member dies, the message when the quorum is lost, auth with
// a password file (a wrong password, an expired token) and TLS with a CA;
// connections from a given local address.
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include "rendezvous/etcd/client.hpp"
#include "tests/common/skip.hpp"
#include "tests/etcd/etcd_test.hpp"

namespace etcd = cc::rv::etcd;
using namespace cc::test;
using std::chrono::milliseconds;

namespace {

Clock::time_point in(int ms) { return Clock::now() + milliseconds(ms); }

std::unique_ptr<etcd::Client> client_for(const std::string& address, etcd::ClientOptions o = {}) {
  REQUIRE(etcd::parse_address(address, &o.address).ok());
  std::unique_ptr<etcd::Client> c;
  const cc::Status s = etcd::Client::create(o, &c);
  INFO(s.message);
  REQUIRE(s.ok());
  return c;
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
  ::chmod(path.c_str(), 0600);
}

}  // namespace

TEST_CASE("etcd client: put, get, range, delete and transactions on one member") {
  auto cluster = start_cluster();
  auto c = client_for(cluster->address());
  REQUIRE(c->check(in(5000)).ok());
  CHECK(c->cluster_size() == 1);

  int64_t rev = 0;
  REQUIRE(c->put("t/a", std::string("one\0two", 7), 0, in(5000), &rev).ok());
  CHECK(rev > 0);
  std::optional<etcd::KeyValue> kv;
  REQUIRE(c->get("t/a", in(5000), &kv, nullptr).ok());
  REQUIRE(kv.has_value());
  CHECK(kv->value == std::string("one\0two", 7));
  CHECK(kv->create_revision == rev);
  REQUIRE(c->put("t/b", "", 0, in(5000)).ok());  // an empty value is a value
  REQUIRE(c->get("t/b", in(5000), &kv, nullptr).ok());
  REQUIRE(kv.has_value());
  CHECK(kv->value.empty());
  REQUIRE(c->get("t/none", in(5000), &kv, nullptr).ok());
  CHECK_FALSE(kv.has_value());

  etcd::RangeResult r;
  REQUIRE(c->range("t/", etcd::prefix_end("t/"), in(5000), &r).ok());
  REQUIRE(r.kvs.size() == 2);
  CHECK(r.kvs[0].key == "t/a");
  CHECK(r.kvs[1].key == "t/b");

  // create-if-absent: only the first wins; the loser reads the winner's value
  auto create = [&](const std::string& value) {
    etcd::Txn t;
    t.compare = {etcd::Compare::absent("t/once")};
    t.success = {etcd::Op::put("t/once", value)};
    t.failure = {etcd::Op::get("t/once")};
    etcd::TxnResult out;
    REQUIRE(c->txn(t, in(5000), &out).ok());
    return out;
  };
  auto first = create("A");
  CHECK(first.succeeded);
  auto second = create("B");
  CHECK_FALSE(second.succeeded);
  REQUIRE(second.responses.size() == 1);
  REQUIRE(second.responses[0].range.kvs.size() == 1);
  CHECK(second.responses[0].range.kvs[0].value == "A");

  // compare-and-set on the value
  etcd::Txn cas;
  cas.compare = {etcd::Compare::value_is("t/once", "A")};
  cas.success = {etcd::Op::put("t/once", "C", 0, true)};
  etcd::TxnResult out;
  REQUIRE(c->txn(cas, in(5000), &out).ok());
  CHECK(out.succeeded);
  REQUIRE(out.responses.size() == 1);
  REQUIRE(out.responses[0].prev_kv.has_value());
  CHECK(out.responses[0].prev_kv->value == "A");
  REQUIRE(c->txn(cas, in(5000), &out).ok());
  CHECK_FALSE(out.succeeded);  // the value is C now

  // a value compare on an absent key fails; an empty expected value matches an empty value
  etcd::Txn empty;
  empty.compare = {etcd::Compare::value_is("t/b", "")};
  REQUIRE(c->txn(empty, in(5000), &out).ok());
  CHECK(out.succeeded);
  empty.compare = {etcd::Compare::value_is("t/none", "")};
  REQUIRE(c->txn(empty, in(5000), &out).ok());
  CHECK_FALSE(out.succeeded);

  int64_t deleted = 0;
  REQUIRE(c->delete_range("t/", etcd::prefix_end("t/"), in(5000), &deleted).ok());
  CHECK(deleted == 3);  // t/a, t/b, t/once
  REQUIRE(c->delete_range("t/a", "", in(5000), &deleted).ok());  // absent: still success
  CHECK(deleted == 0);
}

TEST_CASE("etcd client: a lease holds its keys until revoked or expired") {
  auto cluster = start_cluster();
  auto c = client_for(cluster->address());
  int64_t id = 0, ttl = 0;
  REQUIRE(c->lease_grant(5, in(5000), &id, &ttl).ok());
  CHECK(id != 0);
  CHECK(ttl == 5);
  REQUIRE(c->put("l/a", "1", id, in(5000)).ok());
  int64_t left = 0;
  REQUIRE(c->lease_keepalive(id, in(5000), &left).ok());
  CHECK(left == 5);
  REQUIRE(c->lease_revoke(id, in(5000)).ok());
  std::optional<etcd::KeyValue> kv;
  REQUIRE(c->get("l/a", in(5000), &kv, nullptr).ok());
  CHECK_FALSE(kv.has_value());
  REQUIRE(c->lease_keepalive(id, in(5000), &left).ok());
  CHECK(left == 0);                           // gone
  CHECK(c->lease_revoke(id, in(5000)).ok());  // gone already: success

  // expiry: etcd's shortest TTL here is 1 s (1.5 x the 500 ms election timeout)
  REQUIRE(c->lease_grant(1, in(5000), &id, &ttl).ok());
  REQUIRE(c->put("l/b", "2", id, in(5000)).ok());
  const auto t0 = Clock::now();
  for (;;) {
    REQUIRE(c->get("l/b", in(5000), &kv, nullptr).ok());
    if (!kv) break;
    REQUIRE(ms_since(t0) < 5000);
    std::this_thread::sleep_for(milliseconds(50));
  }
}

TEST_CASE("etcd client: a dead member is passed over within the deadline") {
  auto cluster = start_cluster(members(3));
  auto c = client_for(cluster->address());
  REQUIRE(c->check(in(5000)).ok());
  CHECK(c->cluster_size() == 3);
  REQUIRE(c->put("f/k", "1", 0, in(5000)).ok());

  cluster->kill(cluster->leader());
  const auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) {
    cc::Status s = c->put("f/k" + std::to_string(i), "v", 0, in(8000));
    INFO(s.message);
    REQUIRE(s.ok());
  }
  std::optional<etcd::KeyValue> kv;
  REQUIRE(c->get("f/k19", in(5000), &kv, nullptr).ok());
  CHECK(kv.has_value());
  CHECK(ms_since(t0) < 8000);
}

TEST_CASE("etcd client: losing the quorum is an error naming etcd, the endpoints and the quorum") {
  auto cluster = start_cluster(members(3));
  auto c = client_for(cluster->address());
  REQUIRE(c->check(in(5000)).ok());
  REQUIRE(c->put("q/k", "1", 0, in(5000)).ok());
  const int survivor = cluster->leader();
  for (int i = 0; i < 3; ++i)
    if (i != survivor) cluster->kill(i);
  const auto t0 = Clock::now();
  cc::Status s = c->put("q/k", "2", 0, in(3000));
  const long long elapsed = ms_since(t0);
  INFO(s.message);
  CHECK(s.code == CC_ERR_RENDEZVOUS);
  CHECK(elapsed < 4000);
  CHECK_THAT(s.message, Catch::Contains("etcd at " + cluster->endpoint(0)) &&
                            Catch::Contains(cluster->endpoint(1)) &&
                            Catch::Contains(cluster->endpoint(2)) && Catch::Contains("quorum") &&
                            Catch::Contains("a cluster of 3 members needs 2"));
  // reads need the quorum too (they are linearizable)
  std::optional<etcd::KeyValue> kv;
  s = c->get("q/k", in(2000), &kv, nullptr);
  CHECK(s.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(s.message, Catch::Contains("quorum"));
}

TEST_CASE("etcd client: nothing listening is named as such") {
  auto cluster = start_cluster();
  const std::string address = cluster->address();
  cluster.reset();  // stopped: its port refuses
  auto c = client_for(address);
  const auto t0 = Clock::now();
  cc::Status s = c->check(in(700));
  CHECK(s.code == CC_ERR_RENDEZVOUS);
  CHECK(ms_since(t0) >= 600);
  CHECK(ms_since(t0) < 2000);
  CHECK_THAT(s.message,
             Catch::Contains("No endpoint answered") && Catch::Contains("connection refused"));
}

namespace {

// 127.0.0.7 as /proc/net/tcp writes a local address: hex, in memory order.
bool connected_from_127_0_0_7() {
  std::ifstream in("/proc/self/net/tcp");
  std::string line;
  while (std::getline(in, line))
    if (line.find(" 0700007F:") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("etcd client: connections from the local address it is given") {
  auto cluster = start_cluster();
  etcd::ClientOptions o;
  o.local_address = "127.0.0.7";
  auto c = client_for(cluster->address(), o);
  int64_t rev = 0;
  REQUIRE(c->put("t/from", "seven", 0, in(5000), &rev).ok());
  CHECK(connected_from_127_0_0_7());  // its idle connection, kept for the next request

  etcd::ClientOptions wrong;
  wrong.local_address = "host-7";
  REQUIRE(etcd::parse_address(cluster->address(), &wrong.address).ok());
  std::unique_ptr<etcd::Client> refused;
  const cc::Status s = etcd::Client::create(wrong, &refused);
  CHECK(s.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(s.message, Catch::Contains("'host-7' is not an IPv4 or IPv6 address"));
}

TEST_CASE("etcd client: users and passwords from a file; a wrong password is refused in words") {
  auto cluster = start_cluster(members(1, {"--auth-token-ttl=1"}));
  std::string out;
  REQUIRE(cluster->etcdctl({"user", "add", "root:rootpw"}, &out) == 0);
  REQUIRE(cluster->etcdctl({"role", "add", "root"}, &out) == 0);
  REQUIRE(cluster->etcdctl({"user", "grant-role", "root", "root"}, &out) == 0);
  REQUIRE(cluster->etcdctl({"auth", "enable"}, &out) == 0);
  const std::string dir = cluster->dir();

  SECTION("no auth file") {
    auto c = client_for(cluster->address());
    cc::Status s = c->put("a/k", "v", 0, in(3000));
    CHECK(s.code == CC_ERR_AUTH);
    CHECK_THAT(s.message,
               Catch::Contains("authentication enabled") && Catch::Contains("CC_ETCD_AUTH_FILE"));
  }
  SECTION("a wrong password") {
    write_file(dir + "/wrong", "root:not-the-password\n");
    etcd::ClientOptions o;
    o.auth_file = dir + "/wrong";
    auto c = client_for(cluster->address(), o);
    const auto t0 = Clock::now();
    cc::Status s = c->check(in(5000));
    CHECK(s.code == CC_ERR_AUTH);
    CHECK(ms_since(t0) < 3000);
    CHECK_THAT(s.message, Catch::Contains("refused the user 'root'") &&
                              Catch::Contains(dir + "/wrong") &&
                              Catch::Contains("invalid user ID or password"));
  }
  SECTION("the right password, and a token that expires") {
    write_file(dir + "/right", "root:rootpw\n");
    etcd::ClientOptions o;
    o.auth_file = dir + "/right";
    auto c = client_for(cluster->address(), o);
    REQUIRE(c->put("a/k", "v", 0, in(5000)).ok());
    std::this_thread::sleep_for(milliseconds(2500));  // the simple token lives 1 s here
    std::optional<etcd::KeyValue> kv;
    cc::Status s = c->get("a/k", in(5000), &kv, nullptr);
    INFO(s.message);
    REQUIRE(s.ok());
    CHECK(kv.has_value());
  }
  SECTION("a malformed auth file is refused before anything is sent") {
    write_file(dir + "/bad", "just-a-password\n");
    etcd::ClientOptions o;
    REQUIRE(etcd::parse_address(cluster->address(), &o.address).ok());
    o.auth_file = dir + "/bad";
    std::unique_ptr<etcd::Client> c;
    cc::Status s = etcd::Client::create(o, &c);
    CHECK(s.code == CC_ERR_INVALID_ARGUMENT);
    CHECK_THAT(s.message, Catch::Contains("user:password"));
  }
}

namespace {

// A CA and a server certificate for 127.0.0.1, made with the openssl program.
bool make_certificates(const std::string& dir) {
  const std::string cmd = "cd '" + dir +
                          "' && "
                          "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=cc-test-ca "
                          "-keyout ca.key -out ca.pem "
                          ">/dev/null 2>&1 && "
                          "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "
                          "server.key -out server.csr >/dev/null 2>&1 && "
                          "printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && "
                          "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
                          "-CAcreateserial -days 2 -extfile san.ext "
                          "-out server.pem >/dev/null 2>&1 && "
                          "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other-ca "
                          "-keyout other.key -out other.pem "
                          ">/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST_CASE("etcd client: TLS with a CA file", "[.tls]") {
  const std::string certs = cc::test::make_temp_dir("cc-etcd-certs");
  REQUIRE(!certs.empty());
  struct Cleanup {
    std::string dir;
    ~Cleanup() { cc::test::remove_tree(dir); }
  } cleanup{certs};
  if (!make_certificates(certs)) {
    cc::test::remove_tree(certs);
    cc::test::skip_case("no openssl program here to make the certificates: TLS not tested");
  }
  EtcdClusterOptions o;
  o.cert_file = certs + "/server.pem";
  o.key_file = certs + "/server.key";
  auto cluster = start_cluster(o);
  REQUIRE(cluster->address().rfind("etcds://", 0) == 0);

  etcd::ClientOptions good;
  good.ca_file = certs + "/ca.pem";
  auto c = client_for(cluster->address(), good);
  REQUIRE(c->put("tls/k", "v", 0, in(5000)).ok());
  std::optional<etcd::KeyValue> kv;
  REQUIRE(c->get("tls/k", in(5000), &kv, nullptr).ok());
  CHECK(kv->value == "v");

  etcd::ClientOptions wrong;
  wrong.ca_file = certs + "/other.pem";
  auto w = client_for(cluster->address(), wrong);
  cc::Status s = w->check(in(3000));
  CHECK(s.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(s.message, Catch::Contains("certificate") && Catch::Contains("other.pem"));

  // plain HTTP against a TLS port
  auto plain = client_for("etcd://" + cluster->endpoint(0));
  s = plain->check(in(1000));
  CHECK_FALSE(s.ok());
}
