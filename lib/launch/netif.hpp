// Network interfaces and the route to the rendezvous: which local interface
// reaches MASTER_ADDR, so NCCL's sockets use that one and not a Docker bridge
// or a management network the other hosts cannot reach. No CUDA here.
#pragma once

#include <string>
#include <vector>

#include "common/settings.hpp"
#include "common/status.hpp"

struct sockaddr;

namespace cc::launch {

struct Address {
  int family = 0;       // AF_INET or AF_INET6
  std::string address;  // numeric, without scope ("192.0.2.1", "fe80::1")
  int prefix_len = -1;  // netmask bits, -1 when unknown
};

struct Interface {
  std::string name;
  bool up = false;
  bool running = false;  // carrier present
  bool loopback = false;
  std::vector<Address> addresses;  // IPv4 and IPv6 only
};

// Every interface with its IPv4/IPv6 addresses (getifaddrs), in kernel order.
Status list_interfaces(std::vector<Interface>* out);

struct Route {
  std::string target;          // the numeric address the route leads to
  std::string source_address;  // the local address the kernel picked
  std::string ifname;          // the interface holding source_address
  int family = 0;
};

// The local interface whose route reaches `host` (IPv4, IPv6 with or without
// brackets, or a host name): connects a UDP socket (no packet is sent) and
// maps its source address to the interface holding it. Errors say "cannot
// resolve X" or "no route to X", and what to check.
Status route_source_for(const std::string& host, Route* out);

struct IfnameChoice {
  std::string ifname;      // the value NCCL_SOCKET_IFNAME should have
  bool from_user = false;  // true: NCCL_SOCKET_IFNAME was already set and is kept
  Route route;             // the route found, when !from_user
};

// When NCCL_SOCKET_IFNAME is set (non-empty), keeps the user's value;
// otherwise the interface whose route reaches master_addr.
Status choose_nccl_socket_ifname(const std::string& master_addr, const settings::Getenv& getenv,
                                 IfnameChoice* out);

// Whether NCCL would use `ifname` under NCCL_SOCKET_IFNAME=spec: a comma
// list of prefixes, "=" for exact names, a leading "^" to exclude instead.
bool nccl_ifname_matches(const std::string& spec, const std::string& ifname);

// An IPv4 or IPv6 socket address as numeric text ("192.0.2.1", "fe80::1"),
// without port or scope; empty when it cannot be written.
std::string numeric_address(const sockaddr* sa);

// "[::1]" -> "::1"; anything else unchanged.
std::string strip_brackets(const std::string& host);

}  // namespace cc::launch
