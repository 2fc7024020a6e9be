// etcd addresses as users write them: etcd://host:port[,host:port...] and
// etcds://, and the message for each mistake.
#include <catch2/catch.hpp>

#include "rendezvous/etcd/endpoints.hpp"

namespace etcd = cc::rv::etcd;

TEST_CASE("etcd address: one endpoint, several, IPv6, TLS") {
  etcd::Address a;
  REQUIRE(etcd::parse_address("etcd://127.0.0.1:2379", &a).ok());
  CHECK_FALSE(a.tls);
  REQUIRE(a.endpoints.size() == 1);
  CHECK(a.endpoints[0].host == "127.0.0.1");
  CHECK(a.endpoints[0].port == 2379);

  REQUIRE(etcd::parse_address("etcds://node-a:2379,node-b.example.com:12379,[::1]:2381/", &a).ok());
  CHECK(a.tls);
  REQUIRE(a.endpoints.size() == 3);
  CHECK(a.endpoints[1].host == "node-b.example.com");
  CHECK(a.endpoints[1].port == 12379);
  CHECK(a.endpoints[2].host == "::1");
  CHECK(a.endpoints[2].text() == "[::1]:2381");
  CHECK(a.text() == "etcds://node-a:2379,node-b.example.com:12379,[::1]:2381");
  CHECK(a.endpoint_list() == "node-a:2379, node-b.example.com:12379, [::1]:2381");

  REQUIRE(etcd::parse_address("ETCD://h:1", &a).ok());
  CHECK(etcd::is_etcd_address("etcd://x:1"));
  CHECK(etcd::is_etcd_address("EtcdS://x:1"));
  CHECK_FALSE(etcd::is_etcd_address("10.0.0.1"));
  CHECK_FALSE(etcd::is_etcd_address("etcd:/x"));
}

TEST_CASE("etcd address: each mistake is named") {
  etcd::Address a;
  auto words = [&](const char* text) {
    cc::Status s = etcd::parse_address(text, &a);
    CHECK(s.code == CC_ERR_INVALID_ARGUMENT);
    CHECK_THAT(s.message, Catch::Contains("etcd://host:port"));
    return s.message;
  };
  CHECK_THAT(words("http://h:1"), Catch::Contains("does not start with etcd://"));
  CHECK_THAT(words("etcd://"), Catch::Contains("names no endpoint"));
  CHECK_THAT(words("etcd://h"), Catch::Contains("endpoint 'h' without a port"));
  CHECK_THAT(words("etcd://h:"), Catch::Contains("port '' is not a number"));
  CHECK_THAT(words("etcd://h:0"), Catch::Contains("port '0'"));
  CHECK_THAT(words("etcd://h:70000"), Catch::Contains("port '70000'"));
  CHECK_THAT(words("etcd://h:12x"), Catch::Contains("port '12x'"));
  CHECK_THAT(words("etcd://a:1,,b:2"), Catch::Contains("empty endpoint"));
  CHECK_THAT(words("etcd://a:1,"), Catch::Contains("empty endpoint"));
  CHECK_THAT(words("etcd://::1:2379"), Catch::Contains("IPv6 address in brackets"));
  CHECK_THAT(words("etcd://[::1]"), Catch::Contains("without a port"));
  CHECK_THAT(words("etcd://[::1:2379"), Catch::Contains("no ']'"));
  CHECK_THAT(words("etcd://[]:1"), Catch::Contains("no IPv6 address"));
  CHECK_THAT(words("etcd://:2379"), Catch::Contains("without a host"));
  CHECK_THAT(words("etcd://user@h:1"), Catch::Contains("not a name or an address"));
  CHECK_THAT(words("etcd://h:1/path"), Catch::Contains("not a number"));
}
