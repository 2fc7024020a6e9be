// What the etcd suite's test programs share: the time since a moment, and
// clusters started from a case, which fails with the reason when one does not
// start.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/etcd/etcd_cluster.hpp"

namespace cc::test {

using Clock = std::chrono::steady_clock;

inline long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// The options of a cluster of `n` members with more etcd flags.
inline EtcdClusterOptions members(int n, std::vector<std::string> extra = {}) {
  EtcdClusterOptions o;
  o.members = n;
  o.extra_args = std::move(extra);
  return o;
}

inline std::unique_ptr<EtcdCluster> start_cluster(const EtcdClusterOptions& o = {}) {
  std::unique_ptr<EtcdCluster> c;
  const std::string why = EtcdCluster::start(o, &c);
  INFO(why);
  REQUIRE(why.empty());
  return c;
}

// One one-member cluster for the cases of a program that need nothing
// special; it stops with the process.
inline EtcdCluster& shared_cluster() {
  static std::unique_ptr<EtcdCluster> one = start_cluster();
  return *one;
}

}  // namespace cc::test
