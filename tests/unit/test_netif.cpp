// Interfaces and the route to MASTER_ADDR (lib/netif): loopback only, no
// packets sent.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <map>
#include <string>

#include "lib/launch/netif.hpp"

using namespace cc;

namespace {
settings::Getenv fake_env(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

std::string loopback_name() {
  std::vector<launch::Interface> all;
  REQUIRE(launch::list_interfaces(&all).ok());
  for (const auto& i : all)
    if (i.loopback) return i.name;
  return {};
}
}  // namespace

TEST_CASE("interface listing includes loopback with 127.0.0.1", "[netif]") {
  std::vector<launch::Interface> all;
  Status s = launch::list_interfaces(&all);
  REQUIRE(s.ok());
  bool found = false;
  for (const auto& i : all) {
    if (!i.loopback) continue;
    found = true;
    CHECK(i.up);
    bool has_v4 = false;
    for (const auto& a : i.addresses)
      if (a.family == AF_INET && a.address == "127.0.0.1") {
        has_v4 = true;
        CHECK(a.prefix_len == 8);
      }
    CHECK(has_v4);
  }
  CHECK(found);
}

TEST_CASE("the route to 127.0.0.1 leaves through the loopback interface", "[netif]") {
  launch::Route r;
  Status s = launch::route_source_for("127.0.0.1", &r);
  REQUIRE(s.ok());
  CHECK(r.ifname == loopback_name());
  CHECK(r.source_address == "127.0.0.1");
  CHECK(r.target == "127.0.0.1");
  CHECK(r.family == AF_INET);
}

TEST_CASE("host names and bracketed IPv6 resolve to the loopback route", "[netif]") {
  launch::Route r;
  REQUIRE(launch::route_source_for("localhost", &r).ok());
  CHECK(r.ifname == loopback_name());

  launch::Route r6;
  Status s6 = launch::route_source_for("[::1]", &r6);
  if (s6.ok()) {  // an IPv6-less container has no ::1
    CHECK(r6.ifname == loopback_name());
    CHECK(r6.source_address == "::1");
  } else {
    CHECK_THAT(s6.message, Catch::Contains("no route to ::1"));
  }
  CHECK(launch::strip_brackets("[fe80::1]") == "fe80::1");
  CHECK(launch::strip_brackets("10.1.2.3") == "10.1.2.3");
}

TEST_CASE("an unresolvable name gives the words", "[netif]") {
  launch::Route r;
  Status s = launch::route_source_for("no-such-host.invalid", &r);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(s.message, Catch::Contains("cannot resolve \"no-such-host.invalid\""));
  CHECK_THAT(s.message, Catch::Contains("MASTER_ADDR"));

  Status empty = launch::route_source_for("", &r);
  CHECK(empty.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(empty.message, Catch::Contains("set MASTER_ADDR"));
}

TEST_CASE("choose_nccl_socket_ifname keeps the user's NCCL_SOCKET_IFNAME", "[netif]") {
  launch::IfnameChoice c;
  REQUIRE(launch::choose_nccl_socket_ifname("127.0.0.1",
                                            fake_env({{"NCCL_SOCKET_IFNAME", "^docker,lo"}}), &c)
              .ok());
  CHECK(c.from_user);
  CHECK(c.ifname == "^docker,lo");

  // Kept even when the master cannot be resolved: the user knows best.
  launch::IfnameChoice kept;
  REQUIRE(launch::choose_nccl_socket_ifname("no-such-host.invalid",
                                            fake_env({{"NCCL_SOCKET_IFNAME", "eth7"}}), &kept)
              .ok());
  CHECK(kept.ifname == "eth7");
}

TEST_CASE("choose_nccl_socket_ifname picks the route's interface when unset", "[netif]") {
  launch::IfnameChoice c;
  REQUIRE(launch::choose_nccl_socket_ifname("127.0.0.1", fake_env({{"NCCL_SOCKET_IFNAME", ""}}), &c)
              .ok());
  CHECK_FALSE(c.from_user);
  CHECK(c.ifname == loopback_name());
  CHECK(c.route.source_address == "127.0.0.1");

  launch::IfnameChoice bad;
  Status s = launch::choose_nccl_socket_ifname("no-such-host.invalid", fake_env({}), &bad);
  CHECK(s.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(s.message, Catch::Contains("cannot resolve"));
  CHECK_THAT(s.message, Catch::Contains("NCCL_SOCKET_IFNAME"));
}

TEST_CASE("nccl_ifname_matches follows NCCL_SOCKET_IFNAME's rules", "[netif]") {
  CHECK(launch::nccl_ifname_matches("eth", "eth0"));
  CHECK(launch::nccl_ifname_matches("ib,eth", "eth1"));
  CHECK_FALSE(launch::nccl_ifname_matches("ib", "eth0"));
  CHECK(launch::nccl_ifname_matches("=eth0", "eth0"));
  CHECK_FALSE(launch::nccl_ifname_matches("=eth0", "eth01"));
  CHECK_FALSE(launch::nccl_ifname_matches("^docker,lo", "docker0"));
  CHECK_FALSE(launch::nccl_ifname_matches("^docker,lo", "lo"));
  CHECK(launch::nccl_ifname_matches("^docker,lo", "eth0"));
  CHECK(launch::nccl_ifname_matches("^=eth0", "eth01"));
}
