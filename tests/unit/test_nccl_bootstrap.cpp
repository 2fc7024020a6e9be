// The line about NCCL's own bootstrap: by the version, what cc knows and what
// to do.
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

TEST_CASE("before 2.32: cc knows of no bootstrap encryption, and says what to do") {
  const std::string line = nccl_bootstrap_tls_line(22809);
  CHECK_THAT(line, StartsWith("NCCL 2.28.9 here: cc does not know of bootstrap encryption in "
                              "this version"));
  CHECK_THAT(line, Contains("keep NCCL's network private"));
  CHECK_THAT(line, Contains("NCCL_SOCKET_IFNAME"));
  CHECK_THAT(line, Contains("2.32 or later built with TLS_BACKEND=OPENSSL3"));
  CHECK_THAT(nccl_bootstrap_tls_line(23199), Contains("cc does not know of"));
  CHECK(line.find('\n') == std::string::npos);
}

TEST_CASE("from 2.32: documented, but cc cannot tell whether this build has it") {
  const std::string line = nccl_bootstrap_tls_line(23200);
  CHECK_THAT(line, StartsWith("NCCL 2.32.0 here: NCCL documents encryption"));
  CHECK_THAT(line, Contains("TLS_BACKEND=OPENSSL3"));
  CHECK_THAT(line, Contains("cc cannot tell whether this build has it"));
  CHECK_THAT(nccl_bootstrap_tls_line(23203), StartsWith("NCCL 2.32.3 here: NCCL documents"));
}

TEST_CASE("an unknown version: cc cannot tell") {
  CHECK_THAT(nccl_bootstrap_tls_line(0), StartsWith("NCCL unknown here: cc cannot tell"));
}
