// The line about NCCL's own bootstrap: by whether the loaded NCCL has
// ncclSetEncryption, what that means and what to do.
#include <catch2/catch.hpp>

#include "lib/launch/nccl_bootstrap.hpp"

using Catch::Contains;
using Catch::StartsWith;
using cc::launch::nccl_bootstrap_tls_line;
using cc::launch::nccl_version_text;

TEST_CASE("NCCL version codes in words") {
  CHECK(nccl_version_text(22809) == "2.28.9");
  CHECK(nccl_version_text(23203) == "2.32.3");
  CHECK(nccl_version_text(2804) == "2.8.4");
  CHECK(nccl_version_text(0) == "unknown");
}

TEST_CASE("without ncclSetEncryption: NCCL's bootstrap goes in clear, and what to do") {
  const std::string line = nccl_bootstrap_tls_line(22809, false);
  CHECK_THAT(line, StartsWith("NCCL 2.28.9 here: it has no ncclSetEncryption, so NCCL's "
                              "bootstrap and data go in clear"));
  CHECK_THAT(line, Contains("keep NCCL's network private"));
  CHECK_THAT(line, Contains("NCCL_SOCKET_IFNAME"));
  CHECK_THAT(line, Contains("2.32 or later built with TLS_BACKEND=OPENSSL3"));
  CHECK(line.find('\n') == std::string::npos);
  // The library decides, not the version: a 2.32 without the call says so too.
  CHECK_THAT(nccl_bootstrap_tls_line(23203, false),
             StartsWith("NCCL 2.32.3 here: it has no ncclSetEncryption"));
  CHECK_THAT(nccl_bootstrap_tls_line(0, false), StartsWith("NCCL unknown here: it has no"));
}

TEST_CASE("with ncclSetEncryption: it can, if built with TLS, and the program gives the key") {
  const std::string line = nccl_bootstrap_tls_line(23203, true);
  CHECK_THAT(line, StartsWith("NCCL 2.32.3 here: it has ncclSetEncryption, so it can encrypt its "
                              "own TCP sockets, bootstrap included"));
  CHECK_THAT(line, Contains("TLS_BACKEND=OPENSSL3"));
  CHECK_THAT(line, Contains("cc sets no key"));
  CHECK_THAT(line, Contains("before cc_comm_init"));
  CHECK(line.find('\n') == std::string::npos);
}
