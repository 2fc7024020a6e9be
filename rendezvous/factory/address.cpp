#include "rendezvous/factory/address.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "rendezvous/etcd/endpoints.hpp"

namespace cc::rv::factory {
namespace {

constexpr const char* kForms =
    "write a host name or address (with its port apart, as MASTER_PORT), tcp://host:port, or "
    "etcd://host:port[,host:port...] (etcds:// for TLS)";

Status bad(std::string_view text, const std::string& why, const std::string& fix = kForms) {
  return make_status(CC_ERR_INVALID_ARGUMENT,
                     "the rendezvous address '" + std::string(text) + "' " + why + ": " + fix);
}

bool same_nocase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// A name or an address: letters, digits, '.', '-', '_'; an IPv6 address
// also ':' and a zone's '%'.
bool host_chars(std::string_view host, bool v6) {
  return std::all_of(host.begin(), host.end(), [v6](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
           (v6 && (c == ':' || c == '%'));
  });
}

// A host alone: a name, an IPv4 address, or an IPv6 address with or without
// brackets. Its port comes apart.
Status parse_host(std::string_view text, ServerAt* server) {
  std::string_view host = text;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const size_t colons = static_cast<size_t>(std::count(host.begin(), host.end(), ':'));
  if (colons == 1 && text.front() != '[')
    return bad(text, "has a port in it",
               "write tcp://" + std::string(text) +
                   ", or the host alone with its port apart (MASTER_PORT)");
  if (host.empty() || !host_chars(host, colons > 0))
    return bad(text, "is not a host name or address");
  server->host = std::string(host);
  return Status::success();
}

// tcp://host:port, tcp://[v6]:port.
Status parse_tcp(std::string_view text, std::string_view rest, ServerAt* server) {
  const std::string fix = "write it as tcp://host:port ([v6]:port for IPv6)";
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty()) return bad(text, "names no host", fix);
  if (rest.find(',') != std::string_view::npos)
    return bad(text, "names more than one host",
               "cc's server is one host and port; a list of endpoints is for etcd://");
  std::string_view host;
  std::string_view port_text;
  if (rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad(text, "has '[' but no ']'", fix);
    host = rest.substr(1, close - 1);
    if (host.find(':') == std::string_view::npos || !host_chars(host, true))
      return bad(text, "has brackets that hold no IPv6 address", fix);
    if (close + 1 >= rest.size() || rest[close + 1] != ':') return bad(text, "has no port", fix);
    port_text = rest.substr(close + 2);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad(text, "has no port", fix);
    host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return bad(text, "has an IPv6 address without brackets", "write tcp://[::1]:29500");
    if (host.empty()) return bad(text, "names no host", fix);
    if (!host_chars(host, false))
      return bad(text,
                 "has a host that is not a name or an address (a path or user part does "
                 "not belong in it)",
                 fix);
  }
  int port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < 1 || port > 65535)
    return bad(text, "has the port '" + std::string(port_text) + "', not a number in 1..65535",
               fix);
  server->host = std::string(host);
  server->port = port;
  return Status::success();
}

}  // namespace

std::string ServerAt::text() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

const char* ServerAt::any() const { return host.find(':') != std::string::npos ? "::" : "0.0.0.0"; }

void Address::set_port(int port) {
  if (needs_port_) server_->port = port;
}

std::string Address::where() const { return server_ ? server_->text() : text_; }

Address Address::on_loopback() const {
  Address out = *this;
  out.server_->host = server_->host.find(':') != std::string::npos ? "::1" : "127.0.0.1";
  out.route_host_ = out.server_->host;
  out.text_ = "tcp://" + out.server_->text();
  out.needs_port_ = false;
  return out;
}

Status parse_address(std::string_view text, Address* out) {
  if (text.empty()) return bad(text, "is empty");
  Address a;
  a.text_ = std::string(text);
  if (etcd::is_etcd_address(text)) {
    etcd::Address cluster;
    if (Status s = etcd::parse_address(text, &cluster); !s.ok()) return s;
    a.route_host_ = cluster.endpoints.front().host;
    *out = std::move(a);
    return Status::success();
  }
  ServerAt server;
  if (const size_t scheme = text.find("://"); scheme != std::string_view::npos) {
    if (!same_nocase(text.substr(0, scheme), "tcp"))
      return bad(text, "has the scheme '" + std::string(text.substr(0, scheme + 3)) +
                           "', which cc does not know");
    if (Status s = parse_tcp(text, text.substr(scheme + 3), &server); !s.ok()) return s;
  } else {
    if (Status s = parse_host(text, &server); !s.ok()) return s;
    a.needs_port_ = true;
  }
  a.route_host_ = server.host;
  a.server_ = std::move(server);
  *out = std::move(a);
  return Status::success();
}

Status parse_address(std::string_view text, int port, Address* out) {
  if (Status s = parse_address(text, out); !s.ok()) return s;
  out->set_port(port);
  return Status::success();
}

}  // namespace cc::rv::factory
