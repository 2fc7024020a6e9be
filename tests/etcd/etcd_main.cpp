// The main of the etcd suite: skips (exit code 77, meson's "skipped") with a
// message where no etcd program is found, else runs the Catch2 cases.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "tests/etcd/etcd_cluster.hpp"

int main(int argc, char** argv) {
  if (cc::test::EtcdCluster::find_etcd().empty()) {
    std::fprintf(
        stderr,
        "SKIP: no etcd program found (install Debian's etcd-server, or set CC_ETCD_BIN to an "
        "etcd 3.4+ binary)\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
