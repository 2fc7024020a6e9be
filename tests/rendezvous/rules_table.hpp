// The conformance table of the rendezvous rules: joins that each rule
// refuses, with the exact words every rank gets, and the joins that are
// accepted. The rendezvous suite runs it through the rules alone and through
// cc's server (test_rules_table.cpp); the etcd suite runs the same cases
// through cc's server and through real etcd, and compares the words
// (tests/etcd/test_rules_conformance.cpp).
//
// The words name the job as {job}; what a rank must share and reach, which
// differ by backend, as {join-settings} (a join's deadline) and
// {recover-settings} (a recovery's deadline): expand() fills them in.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "common/status.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/server.hpp"

namespace cc::test {

// What a backend's words say of how it is reached.
struct BackendWords {
  std::string join_settings;     // "MASTER_ADDR, MASTER_PORT and job id, and can reach the server"
  std::string recover_settings;  // "MASTER_ADDR, MASTER_PORT and job id"
};
BackendWords server_words();
BackendWords etcd_words(const std::string& endpoint_list);

std::string expand(const std::string& words, const std::string& job, const BackendWords& b);

// Rank `rank` of `world` in join 1: host host-<a + rank>, pid 1000 + rank,
// NCCL 2.28.9, its own GPU GPU-<rank>; rank 0 brings an id of 128 x 0x42.
rv::Join table_join(int rank, int world, int timeout_ms = 10000);

struct JoinCase {
  std::string name;
  std::vector<rv::Join> joins;  // in the order they arrive
  cc_result_t code;             // what every join returns; CC_SUCCESS: all join
  std::string words;            // its words, exactly (before expand())
};

std::vector<JoinCase> join_cases();

// Running joins through a backend: a connection each, made by Connect.
using Connect = std::function<std::unique_ptr<rv::Client>()>;

struct JoinOutcome {
  Status status;
  rv::Joined joined;
};

// Each join on its own connection and thread, each `later_ms` after the one
// before (so they arrive in order). Connections stay open until every join
// returned.
std::vector<JoinOutcome> run_joins(const Connect& connect, const std::vector<rv::Join>& joins,
                                   int later_ms = 300);

// cc's own server on loopback, and connections to it for a job.
struct LoopbackServer {
  std::unique_ptr<rv::Server> server;
  LoopbackServer();
  Connect connect(const std::string& job) const;
};

}  // namespace cc::test
