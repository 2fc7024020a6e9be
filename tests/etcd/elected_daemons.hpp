// What the tests of elected daemons share: `cc-rendezvous --etcd` daemons
// (RENDEZVOUS_PROGRAM) campaigning on one cluster under a prefix, with a
// 2 s lease, and the port of the one that leads.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/child_process.hpp"
#include "tests/common/free_port.hpp"
#include "tests/etcd/etcd_test.hpp"

namespace cc::test {

struct Daemon {
  int port = 0;
  std::unique_ptr<ChildProcess> process;
};

// n daemons campaigning on the cluster under `prefix`, logging at
// `log_level` (to nowhere).
inline std::vector<Daemon> start_daemons(const EtcdCluster& cluster, const std::string& prefix,
                                         int n, const std::string& log_level) {
  const char* program = std::getenv("RENDEZVOUS_PROGRAM");
  REQUIRE(program != nullptr);
  std::vector<Daemon> out;
  for (int i = 0; i < n; ++i) {
    Daemon d;
    d.port = free_port();
    ChildOptions o;
    o.args = {program, "--etcd", cluster.address(), "--bind", "127.0.0.1",
              "--port", std::to_string(d.port), "--advertise",
              "127.0.0.1:" + std::to_string(d.port), "--lease", "2s", "--log-level", log_level};
    o.env = {"CC_ETCD_PREFIX=" + prefix};
    o.stderr_file = "/dev/null";
    o.stdout_file = "/dev/null";
    o.die_with_parent = true;
    d.process = std::make_unique<ChildProcess>(o);
    out.push_back(std::move(d));
  }
  return out;
}

// The port the daemons' leader published, or 0 while none leads.
inline int leader_port(const EtcdCluster& cluster, const std::string& prefix) {
  std::string out;
  if (cluster.etcdctl({"get", prefix + "/leader", "--print-value-only"}, &out) != 0) return 0;
  const size_t colon = out.rfind(':');
  if (colon == std::string::npos) return 0;
  return std::atoi(out.c_str() + colon + 1);
}

// The leader's port once one other than `not_port` leads, or 0 at `timeout`.
inline int wait_leader(const EtcdCluster& cluster, const std::string& prefix, int not_port,
                       std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    const int p = leader_port(cluster, prefix);
    if (p != 0 && p != not_port) return p;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

}  // namespace cc::test
