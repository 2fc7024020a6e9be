// The ranks of the tests whose ranks are member programs (failure,
// recovery): an in-process rendezvous server on loopback, and each rank a
// program named by an environment variable, started as
// `program 127.0.0.1 PORT JOB RANK WORLD [extra...]`.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/server.hpp"
#include "tests/common/child_process.hpp"

namespace cc::test {

// The command line of one rank of the program named by `exe_var`, whose
// rendezvous is at addr:port (an etcd:// address ignores the port).
inline std::vector<std::string> member_args(const char* exe_var, const std::string& addr, int port,
                                            const std::string& job, int rank, int world,
                                            const std::vector<std::string>& extra) {
  const char* exe = std::getenv(exe_var);
  INFO(exe_var);
  REQUIRE(exe != nullptr);
  std::vector<std::string> a = {exe, addr,
                                std::to_string(port), job,
                                std::to_string(rank), std::to_string(world)};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

inline std::vector<std::string> member_args(const char* exe_var, int port, const std::string& job,
                                            int rank, int world,
                                            const std::vector<std::string>& extra) {
  return member_args(exe_var, "127.0.0.1", port, job, rank, world, extra);
}

// A server on 127.0.0.1, on a port of the system's choosing.
inline std::unique_ptr<cc::rv::Server> start_local_server() {
  cc::rv::ServerOptions o;
  o.bind_addr = "127.0.0.1";
  o.port = 0;
  std::unique_ptr<cc::rv::Server> s;
  cc::Status st = cc::rv::Server::start(o, &s);
  INFO(st.message);
  REQUIRE(st.ok());
  return s;
}

}  // namespace cc::test
