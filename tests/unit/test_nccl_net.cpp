// NCCL's interface, address and host id, worked out as NCCL works them out
// (lib/launch/nccl_net): what the reachability test listens on and names.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>

#include "lib/launch/nccl_net.hpp"

namespace {

cc::settings::Getenv env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST_CASE("nccl_net: NCCL_SOCKET_IFNAME names the interface, as NCCL reads it") {
  cc::launch::NcclSocket s;
  REQUIRE(cc::launch::nccl_socket(env_of({{"NCCL_SOCKET_IFNAME", "=lo"}}), &s).ok());
  CHECK(s.ifname == "lo");
  CHECK(s.addr == "127.0.0.1");
  CHECK(s.family == AF_INET);
  // A list of prefixes: the first running interface one of them matches.
  REQUIRE(cc::launch::nccl_socket(env_of({{"NCCL_SOCKET_IFNAME", "nosuch,lo"}}), &s).ok());
  CHECK(s.ifname == "lo");
}

TEST_CASE("nccl_net: an NCCL_SOCKET_IFNAME that matches nothing is an error in words") {
  cc::launch::NcclSocket s;
  const cc::Status st = cc::launch::nccl_socket(env_of({{"NCCL_SOCKET_IFNAME", "nosuchif0"}}), &s);
  CHECK(st.code == CC_ERR_SYSTEM);
  CHECK_THAT(st.message, Catch::Contains("NCCL_SOCKET_IFNAME=nosuchif0 matches no running "
                                         "interface") &&
                             Catch::Contains("running: ") && Catch::Contains("lo") &&
                             Catch::Contains("no socket interface found"));
  // IPv6 loopback is never NCCL's: lo under AF_INET6 is no interface.
  const cc::Status v6 = cc::launch::nccl_socket(
      env_of({{"NCCL_SOCKET_IFNAME", "=lo"}, {"NCCL_SOCKET_FAMILY", "AF_INET6"}}), &s);
  CHECK(v6.code == CC_ERR_SYSTEM);
  CHECK_THAT(v6.message, Catch::Contains("NCCL_SOCKET_FAMILY=AF_INET6"));
}

TEST_CASE("nccl_net: one character of NCCL_SOCKET_IFNAME is ignored, as NCCL ignores it") {
  cc::launch::NcclSocket a, b;
  const cc::Status with = cc::launch::nccl_socket(env_of({{"NCCL_SOCKET_IFNAME", "x"}}), &a);
  const cc::Status without = cc::launch::nccl_socket(env_of({}), &b);
  CHECK(with.code == without.code);
  CHECK(a.ifname == b.ifname);
  CHECK(a.addr == b.addr);
}

TEST_CASE("nccl_net: the host id is NCCL_HOSTID, else the host name and boot id") {
  CHECK(cc::launch::nccl_host_key(env_of({{"NCCL_HOSTID", "rack3-node7"}})) == "rack3-node7");
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof host - 1) == 0);
  const std::string key = cc::launch::nccl_host_key(env_of({}));
  CHECK(key.rfind(host, 0) == 0);
  CHECK(key.size() > std::string(host).size());  // the boot id follows
  CHECK(cc::launch::nccl_host_key(env_of({{"NCCL_HOSTID", std::string(2000, 'h')}})).size() ==
        1023);
}
