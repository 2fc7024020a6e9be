#include "rendezvous/etcd/endpoints.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace cc::rv::etcd {
namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  return std::equal(prefix.begin(), prefix.end(), s.begin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
}

Status bad(std::string_view addr, const std::string& why) {
  return make_status(CC_ERR_INVALID_ARGUMENT,
                     "the etcd address '" + std::string(addr) + "' " + why +
                         "; write it as etcd://host:port[,host:port...] (etcds:// for TLS)");
}

bool valid_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

}  // namespace

std::string Endpoint::text() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string Address::text() const {
  std::string out = tls ? "etcds://" : "etcd://";
  for (size_t i = 0; i < endpoints.size(); ++i) out += (i ? "," : "") + endpoints[i].text();
  return out;
}

std::string Address::endpoint_list() const {
  std::string out;
  for (size_t i = 0; i < endpoints.size(); ++i) out += (i ? ", " : "") + endpoints[i].text();
  return out;
}

bool is_etcd_address(std::string_view addr) {
  return starts_with_nocase(addr, "etcd://") || starts_with_nocase(addr, "etcds://");
}

Status parse_address(std::string_view addr, Address* out) {
  Address result;
  std::string_view rest;
  if (starts_with_nocase(addr, "etcds://")) {
    result.tls = true;
    rest = addr.substr(8);
  } else if (starts_with_nocase(addr, "etcd://")) {
    rest = addr.substr(7);
  } else {
    return bad(addr, "does not start with etcd:// or etcds://");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);  // etcd://h:1/ is common
  if (rest.empty()) return bad(addr, "names no endpoint");
  size_t start = 0;
  for (;;) {
    const size_t comma = rest.find(',', start);
    const std::string_view item =
        rest.substr(start, comma == std::string_view::npos ? rest.npos : comma - start);
    const std::string where = "endpoint '" + std::string(item) + "'";
    if (item.empty()) return bad(addr, "has an empty endpoint (two commas, or a comma at an end)");
    Endpoint ep;
    std::string_view port_text;
    if (item.front() == '[') {
      const size_t close = item.find(']');
      if (close == std::string_view::npos)
        return bad(addr, "has " + where + " with '[' but no ']'");
      ep.host = std::string(item.substr(1, close - 1));
      if (ep.host.empty() || ep.host.find(':') == std::string::npos)
        return bad(addr, "has " + where + " whose brackets hold no IPv6 address");
      if (close + 1 >= item.size() || item[close + 1] != ':')
        return bad(addr, "has " + where + " without a port (etcd's client port is usually 2379)");
      port_text = item.substr(close + 2);
    } else {
      const size_t colon = item.rfind(':');
      if (colon == std::string_view::npos)
        return bad(addr, "has " + where + " without a port (etcd's client port is usually 2379)");
      ep.host = std::string(item.substr(0, colon));
      if (ep.host.find(':') != std::string::npos)
        return bad(addr, "has " + where + ": put an IPv6 address in brackets, [::1]:2379");
      port_text = item.substr(colon + 1);
      if (ep.host.empty()) return bad(addr, "has " + where + " without a host");
      if (!std::all_of(ep.host.begin(), ep.host.end(), valid_host_char))
        return bad(addr, "has " + where +
                             " whose host is not a name or an address (a path or user "
                             "part does not belong in an etcd address)");
    }
    int port = 0;
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || p != port_text.data() + port_text.size() ||
        port < 1 || port > 65535)
      return bad(addr, "has " + where + " whose port '" + std::string(port_text) +
                           "' is not a number in 1..65535");
    ep.port = port;
    result.endpoints.push_back(std::move(ep));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  *out = std::move(result);
  return Status::success();
}

}  // namespace cc::rv::etcd
