#include "lib/launch/netif.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/unique_fd.hpp"

namespace cc::launch {
namespace {

std::string local_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "this host";
  return buf;
}

int prefix_of(const sockaddr* mask) {
  if (mask == nullptr) return -1;
  const unsigned char* p = nullptr;
  size_t n = 0;
  if (mask->sa_family == AF_INET) {
    p = reinterpret_cast<const unsigned char*>(
        &reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    p = reinterpret_cast<const unsigned char*>(
        &reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  } else {
    return -1;
  }
  int bits = 0;
  for (size_t i = 0; i < n; ++i) bits += __builtin_popcount(p[i]);
  return bits;
}

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, 16) == 0;
}

struct IfaddrsFree {
  void operator()(ifaddrs* p) const { freeifaddrs(p); }
};
struct AddrinfoFree {
  void operator()(addrinfo* p) const { freeaddrinfo(p); }
};

using Fd = UniqueFd;

// The interface holding `source`; for IPv6 link-local addresses held by
// several interfaces, the one the scope id names.
std::string interface_holding(const sockaddr* source) {
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) return {};
  std::unique_ptr<ifaddrs, IfaddrsFree> list(raw);
  unsigned scope = 0;
  if (source->sa_family == AF_INET6)
    scope = reinterpret_cast<const sockaddr_in6*>(source)->sin6_scope_id;
  std::string found;
  for (ifaddrs* i = raw; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !same_address(i->ifa_addr, source)) continue;
    if (scope != 0 && if_nametoindex(i->ifa_name) == scope) return i->ifa_name;
    if (found.empty()) found = i->ifa_name;
  }
  return found;
}

}  // namespace

std::string numeric_address(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  const void* src =
      sa->sa_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  if (inet_ntop(sa->sa_family, src, buf, sizeof buf) == nullptr) return {};
  return buf;
}

std::string strip_brackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    return host.substr(1, host.size() - 2);
  return host;
}

bool nccl_ifname_matches(const std::string& spec_in, const std::string& ifname) {
  std::string spec = spec_in;
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  bool listed = false;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(start, comma - start);
    if (!item.empty() && (exact ? ifname == item : ifname.compare(0, item.size(), item) == 0))
      listed = true;
    start = comma + 1;
  }
  return exclude ? !listed : listed;
}

Status list_interfaces(std::vector<Interface>* out) {
  out->clear();
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) {
    return make_status(CC_ERR_SYSTEM,
                       "host " + local_host() + ": cannot list network interfaces (getifaddrs: " +
                           std::strerror(errno) + "); check that /proc and /sys are mounted");
  }
  std::unique_ptr<ifaddrs, IfaddrsFree> list(raw);
  for (ifaddrs* i = raw; i != nullptr; i = i->ifa_next) {
    Interface* itf = nullptr;
    for (auto& known : *out)
      if (known.name == i->ifa_name) itf = &known;
    if (itf == nullptr) {
      out->push_back({});
      itf = &out->back();
      itf->name = i->ifa_name;
    }
    itf->up = itf->up || (i->ifa_flags & IFF_UP) != 0;
    itf->running = itf->running || (i->ifa_flags & IFF_RUNNING) != 0;
    itf->loopback = itf->loopback || (i->ifa_flags & IFF_LOOPBACK) != 0;
    if (i->ifa_addr == nullptr) continue;
    int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    itf->addresses.push_back({family, numeric_address(i->ifa_addr), prefix_of(i->ifa_netmask)});
  }
  return Status::success();
}

Status route_source_for(const std::string& host_in, Route* out) {
  const std::string host = strip_brackets(host_in);
  const std::string me = local_host();
  if (host.empty()) {
    return make_status(
        CC_ERR_INVALID_ARGUMENT,
        "host " + me + ": no rendezvous address given: set MASTER_ADDR (or CC_MASTER_ADDR)");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* raw = nullptr;
  // The port only fills the socket address; connect() on UDP sends nothing.
  int rc = getaddrinfo(host.c_str(), "9", &hints, &raw);
  if (rc != 0) {
    std::string why = rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc);
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "host " + me + ": cannot resolve \"" + host + "\" (" + why +
                           "): check the spelling of MASTER_ADDR, /etc/hosts or DNS on this host, "
                           "or give a numeric address");
  }
  std::unique_ptr<addrinfo, AddrinfoFree> list(raw);
  std::string last_error = "no IPv4 or IPv6 address";
  for (addrinfo* ai = raw; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    Fd fd(socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      last_error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = numeric_address(ai->ai_addr) + ": " + std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      last_error = std::string("getsockname: ") + std::strerror(errno);
      continue;
    }
    const sockaddr* src = reinterpret_cast<const sockaddr*>(&local);
    std::string ifname = interface_holding(src);
    if (ifname.empty()) {
      last_error = "source address " + numeric_address(src) + " is on no interface";
      continue;
    }
    out->target = numeric_address(ai->ai_addr);
    out->source_address = numeric_address(src);
    out->ifname = ifname;
    out->family = ai->ai_family;
    return Status::success();
  }
  return make_status(CC_ERR_SYSTEM, "host " + me + ": no route to " + host + " (" + last_error +
                                        "): check MASTER_ADDR, that an interface is up, and the "
                                        "routing table (ip route get " +
                                        host + ")");
}

Status choose_nccl_socket_ifname(const std::string& master_addr, const settings::Getenv& getenv,
                                 IfnameChoice* out) {
  *out = IfnameChoice{};
  if (const char* user = getenv("NCCL_SOCKET_IFNAME"); user != nullptr && *user != '\0') {
    out->ifname = user;
    out->from_user = true;
    return Status::success();
  }
  Status s = route_source_for(master_addr, &out->route);
  if (!s.ok()) {
    s.message += "; or set NCCL_SOCKET_IFNAME to the interface the other hosts reach";
    return s;
  }
  out->ifname = out->route.ifname;
  return Status::success();
}

}  // namespace cc::launch
