// etcd addresses as users write them: etcd://host:port[,host:port...] for
// plain HTTP, etcds://... for TLS. Pure parsing, no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace cc::rv::etcd {

struct Endpoint {
  std::string host;  // a name, an IPv4 address or an IPv6 address without brackets
  int port = 0;
  // "host:port", "[v6]:port": for messages and the HTTP Host header.
  std::string text() const;
};

struct Address {
  bool tls = false;
  std::vector<Endpoint> endpoints;
  // "etcd://a:1,b:2" (or etcds://), as a user would write it again.
  std::string text() const;
  // "a:1, b:2" for messages.
  std::string endpoint_list() const;
};

// True when `addr` starts with etcd:// or etcds:// (any case).
bool is_etcd_address(std::string_view addr);

// Parses etcd://host:port[,host:port...] (or etcds://). A port is required on
// every endpoint (etcd's client port is usually 2379); IPv6 addresses go in
// brackets. Errors: CC_ERR_INVALID_ARGUMENT naming the part that is wrong.
Status parse_address(std::string_view addr, Address* out);

}  // namespace cc::rv::etcd
