#include "lib/launch/nccl_net.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "lib/launch/host_name.hpp"
#include "lib/launch/netif.hpp"

namespace cc::launch {
namespace {

struct IfaddrsFree {
  void operator()(ifaddrs* p) const { freeifaddrs(p); }
};

// NCCL's findInterfaces with one result: the first entry of getifaddrs that
// is IPv4/IPv6, running, of the forced family, not IPv6 loopback, and whose
// name `spec` selects.
bool find_first(ifaddrs* list, const std::string& spec, int family, NcclSocket* out) {
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int f = i->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6) continue;
    if ((i->ifa_flags & IFF_RUNNING) == 0) continue;
    if (family != -1 && f != family) continue;
    if (f == AF_INET6 &&
        IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr))
      continue;
    if (!nccl_ifname_matches(spec, i->ifa_name)) continue;
    out->ifname = i->ifa_name;
    out->addr = numeric_address(i->ifa_addr);
    out->family = f;
    out->link_local =
        f == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    return true;
  }
  return false;
}

std::string running_interfaces(ifaddrs* list) {
  std::vector<std::string> names;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_RUNNING) == 0) continue;
    const int f = i->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6) continue;
    bool seen = false;
    for (const auto& n : names) seen = seen || n == i->ifa_name;
    if (!seen) names.push_back(i->ifa_name);
  }
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

Status nccl_socket(const settings::Getenv& getenv, NcclSocket* out) {
  *out = NcclSocket{};
  int family = -1;
  const char* fam = getenv("NCCL_SOCKET_FAMILY");
  if (fam != nullptr && std::strcmp(fam, "AF_INET") == 0) family = AF_INET;
  if (fam != nullptr && std::strcmp(fam, "AF_INET6") == 0) family = AF_INET6;
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0)
    return make_status(CC_ERR_SYSTEM, "host " + host_name() +
                                          ": cannot list network interfaces (getifaddrs: " +
                                          std::strerror(errno) + ")");
  std::unique_ptr<ifaddrs, IfaddrsFree> list(raw);
  const char* user = getenv("NCCL_SOCKET_IFNAME");
  if (user != nullptr && std::strlen(user) > 1) {
    if (find_first(raw, user, family, out)) return Status::success();
    return make_status(CC_ERR_SYSTEM,
                       "NCCL_SOCKET_IFNAME=" + std::string(user) + " matches no running interface" +
                           (family == -1 ? "" : std::string(" of NCCL_SOCKET_FAMILY=") + fam) +
                           " on host " + host_name() + " (running: " + running_interfaces(raw) +
                           "), so NCCL's init would fail with 'no socket interface found'; set it "
                           "to the interface the other hosts reach, or unset it");
  }
  for (const char* spec : {"ib", "^docker,lo,virbr", "docker", "lo", "virbr"})
    if (find_first(raw, spec, family, out)) return Status::success();
  return make_status(CC_ERR_SYSTEM, "host " + host_name() +
                                        ": no running network interface for NCCL's sockets "
                                        "(running: " +
                                        running_interfaces(raw) + ")");
}

std::string nccl_host_key(const settings::Getenv& getenv) {
  constexpr size_t kMax = 1023;  // NCCL keeps 1024 bytes with the terminator
  if (const char* id = getenv("NCCL_HOSTID"); id != nullptr) return std::string(id).substr(0, kMax);
  std::string key = host_name();
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot >> id) key += id;
  return key.substr(0, kMax);
}

}  // namespace cc::launch
