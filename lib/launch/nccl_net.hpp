// What NCCL's sockets will do on this host, worked out as NCCL 2.28 does it
// (ncclFindInterfaces and getHostHash), so cc can test the same address
// before NCCL starts and name it in its errors. No CUDA or NCCL here.
#pragma once

#include <string>

#include "common/settings.hpp"
#include "common/status.hpp"

namespace cc::launch {

struct NcclSocket {
  std::string ifname;
  std::string addr;  // numeric, without scope
  int family = 0;    // AF_INET or AF_INET6
  bool link_local = false;
};

// The interface and address NCCL's bootstrap will listen on: with
// NCCL_SOCKET_IFNAME (longer than one character) the first running
// interface it matches (prefixes, "=" exact, "^" excluded); otherwise "ib"
// interfaces first, then any but docker, lo and virbr, then docker, lo,
// virbr. Only running interfaces, IPv6 loopback skipped, NCCL_SOCKET_FAMILY
// (AF_INET, AF_INET6) narrows; the first address in getifaddrs order wins.
// None found: CC_ERR_SYSTEM naming NCCL_SOCKET_IFNAME and the running
// interfaces, as NCCL's init would fail there.
Status nccl_socket(const settings::Getenv& getenv, NcclSocket* out);

// NCCL's host identity: NCCL_HOSTID when set, else the host name followed by
// the kernel's boot id. Ranks with the same key are one host to NCCL (it
// connects them over NVLink or shared memory, not sockets).
std::string nccl_host_key(const settings::Getenv& getenv);

}  // namespace cc::launch
