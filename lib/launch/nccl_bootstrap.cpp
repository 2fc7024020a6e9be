#include "lib/launch/nccl_bootstrap.hpp"

#include <fmt/format.h>

namespace cc::launch {

std::string nccl_version_text(int code) {
  if (code <= 0) return "unknown";
  // NCCL_VERSION_CODE: major*10000 + minor*100 + patch from 2.9, before it major*1000 + ...
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  return fmt::format("{}.{}.{}", major, minor, code % 100);
}

std::string nccl_bootstrap_tls_line(int nccl_version_code) {
  const std::string here = "NCCL " + nccl_version_text(nccl_version_code) + " here: ";
  if (nccl_version_code <= 0)
    return here +
           "cc cannot tell whether it can encrypt its own bootstrap: keep NCCL's network "
           "private (NCCL_SOCKET_IFNAME on a cluster network or a VPN)";
  if (nccl_version_code < kNcclBootstrapTlsDocumented)
    return here +
           "cc does not know of bootstrap encryption in this version, so NCCL's bootstrap and "
           "data go in clear even where cc's rendezvous uses TLS: keep NCCL's network private "
           "(NCCL_SOCKET_IFNAME on a cluster network or a VPN), or use an NCCL of 2.32 or later "
           "built with TLS_BACKEND=OPENSSL3 and give it a key";
  return here +
         "NCCL documents encryption of its own TCP sockets, bootstrap included, from 2.32 in "
         "builds with TLS_BACKEND=OPENSSL3 given a key; cc cannot tell whether this build has "
         "it and does not set it up: see NCCL's Setup page, \"Configuring TCP encryption\"";
}

}  // namespace cc::launch
