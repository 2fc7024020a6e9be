// What the etcd suite's programs that drive the etcd backend directly share:
// its options for a job on a cluster, a connection that must succeed, and
// connections for run_joins (tests/rendezvous/rules_table.hpp).
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "rendezvous/etcd/backend.hpp"
#include "tests/rendezvous/rules_table.hpp"

namespace cc::test {

inline rv::etcd::BackendOptions backend_options(const std::string& address,
                                                const std::string& job, int window_ms = 2000) {
  rv::etcd::BackendOptions o;
  o.address = address;
  o.job_id = job;
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.request_timeout = std::chrono::milliseconds(5000);
  o.heartbeat_window = std::chrono::milliseconds(window_ms);
  o.member = true;
  return o;
}

inline std::unique_ptr<rv::etcd::Backend> connect_backend(const rv::etcd::BackendOptions& o) {
  std::unique_ptr<rv::etcd::Backend> b;
  const Status s = rv::etcd::Backend::connect(o, &b);
  INFO(s.message);
  REQUIRE(s.ok());
  return b;
}

inline Connect etcd_connect(const std::string& address, const std::string& job) {
  return [address, job] {
    return std::unique_ptr<rv::Client>(connect_backend(backend_options(address, job)));
  };
}

}  // namespace cc::test
