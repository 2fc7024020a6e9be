// A rendezvous address as a user writes it (MASTER_ADDR, cc_comm_init's
// master_addr, cc_store_connect's addr, cc-run's --master-addr), parsed
// once, with what the rest of cc asks of it. Pure parsing, no I/O.
//
//   host                       cc's server at host, its port apart (MASTER_PORT)
//   tcp://host:port            cc's server at host:port ([v6]:port for IPv6)
//   etcd://host:port[,...]     an etcd cluster (etcds:// for TLS)
//
// Nobody asks which backend an address names: each question below is about
// what the caller needs (a port, a server to host, a route, a test), and
// rendezvous/factory/connect.hpp makes the backend.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.hpp"

namespace cc::rv::factory {

// cc's own server as an address names it.
struct ServerAt {
  std::string host;  // a name, an IPv4 address, or an IPv6 address without brackets
  int port = 0;
  // "host:port", "[v6]:port".
  std::string text() const;
  // The wildcard address of the host's family, for a server that serves
  // this address: "::" for an IPv6 host, else "0.0.0.0".
  const char* any() const;
};

class Address {
 public:
  // The address as written.
  const std::string& text() const { return text_; }
  // Whether its port is given apart (MASTER_PORT, master_port, --master-port):
  // a host alone. The other forms carry their ports.
  bool needs_port() const { return needs_port_; }
  // That port, for an address that needs one; the others keep their own.
  // Its range is checked where it is used (connect), with a message naming it.
  void set_port(int port);
  // Where it is, for messages: "host:port", "etcd://a:2379,b:2379".
  std::string where() const;
  // cc's own server this address names: the one a job may host (rank 0's
  // embedded server, node 0's cc-run), and cc-doctor probes. None for an
  // etcd cluster, whose election says where the server is
  // (rendezvous/factory/elected.hpp).
  const std::optional<ServerAt>& server() const { return server_; }
  // The host whose route NCCL's interface choice follows (an etcd cluster's
  // first endpoint stands for all: every rank reaches the same cluster).
  const std::string& route_host() const { return route_host_; }
  // The same server reached over this host's loopback (rank 0 reaching the
  // server it hosts, with no hairpin through NAT). Only with a server().
  Address on_loopback() const;

 private:
  friend Status parse_address(std::string_view text, Address* out);
  std::string text_;
  bool needs_port_ = false;
  std::optional<ServerAt> server_;
  std::string route_host_;
};

// Parses any form above. Errors: CC_ERR_INVALID_ARGUMENT naming the address,
// the part that is wrong and the forms cc takes.
Status parse_address(std::string_view text, Address* out);
// The same with a host alone's port (given apart); the other forms ignore it.
Status parse_address(std::string_view text, int port, Address* out);

}  // namespace cc::rv::factory
