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

std::string nccl_bootstrap_tls_line(int nccl_version_code, bool has_set_encryption) {
  const std::string here = "NCCL " + nccl_version_text(nccl_version_code) + " here: ";
  if (has_set_encryption)
    return here +
           "it has ncclSetEncryption, so it can encrypt its own TCP sockets, bootstrap included, "
           "if it was built with TLS_BACKEND=OPENSSL3 (a build without TLS refuses the key); cc "
           "sets no key: the program calls ncclSetEncryption before cc_comm_init, with the same "
           "key on every rank (NCCL's Setup page, \"Configuring TCP encryption\")";
  return here +
         "it has no ncclSetEncryption, so NCCL's bootstrap and data go in clear even where cc's "
         "rendezvous uses TLS: keep NCCL's network private (NCCL_SOCKET_IFNAME on a cluster "
         "network or a VPN), or use an NCCL of 2.32 or later built with TLS_BACKEND=OPENSSL3 "
         "and give it a key";
}

}  // namespace cc::launch
