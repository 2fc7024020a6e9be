// The conformance table of the rendezvous rules: joins that each rule
// refuses, with the exact message every rank gets, and the joins that are
// accepted; departures; the reachability test's verdicts
// (rules_table_preflight.cpp). The rendezvous suite runs it through the rules alone and through
// cc's server (test_rules_table.cpp); the etcd suite runs the same cases
// through cc's server and through real etcd, and compares the message
// (tests/etcd/test_rules_conformance.cpp).
//
// The message names the job as {job}; what a rank must share and reach, which
// differ by backend, as {join-settings} (a join's deadline) and
// {recover-settings} (a recovery's deadline): expand() fills them in.
#pragma once

#include <chrono>
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

// What a backend's message says of how it is reached.
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
  std::string words;            // its message, exactly (before expand())
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

// `world` ranks of a job (table_join), each on its own connection, all joined.
std::vector<std::unique_ptr<rv::Client>> join_world(const Connect& connect, int world);

// --- Departures: what the other members are told --------------------------

// How a member goes: it reports its NCCL init failed (init_failed), it
// aborts (abort), or its connection ends without a leave (dies).
enum class Going { init_failed, abort, dies };

// After every rank joined, rank `rank` goes; every other member gets one
// peer event of `kind` naming it (its rank, host and pid of table_join)
// with exactly `words` (before expand()), and no more: the one that went is
// not told of itself, and its connection's end after an abort or a failed
// init is no news.
struct EventCase {
  std::string name;
  int world;
  int rank;
  Going how;
  std::string reason;  // what it passes to init_failed or abort
  rv::PeerEventKind kind;
  std::string words;
};

std::vector<EventCase> event_cases();

// While ranks 0 .. joining-1 of `world` wait in their join, rank `rank`
// aborts or reports its init failed: every pending join (its own too)
// returns `code` with exactly `words` (before expand()), at once.
struct JoiningCase {
  std::string name;
  int world;
  int joining;
  int rank;
  Going how;  // init_failed or abort
  std::string reason;
  cc_result_t code;
  std::string words;
};

std::vector<JoiningCase> joining_cases();

// The cases run through a backend for job c.name, checking what each rank
// gets (Catch checks; `b`: the backend's message).
void check_event_case(const Connect& connect, const EventCase& c, const BackendWords& b);
void check_joining_case(const Connect& connect, const JoiningCase& c, const BackendWords& b);

// The next peer event on `c` within `timeout` is `want`, every field.
void check_next_event(rv::Client& c, const rv::PeerEvent& want,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
// No peer event comes on `c` within `quiet`.
void check_no_event(rv::Client& c, std::chrono::milliseconds quiet);

// --- The reachability test: the one verdict every member gets ------------

// After every rank of `world` joined, rank `goes` (-1: none) goes `how`
// (with `reason`: its init failed, it aborts, it dies); every other rank but
// `silent` (one that
// never takes part) sends its endpoint: its own NCCL host id (all one when
// one_host), 127.0.0.1 on interface lo, and a port where a listener of the
// test accepts or, for the ranks in `refusing`, one where nothing listens
// (connections are refused); rank `off` with CC_PREFLIGHT=0. Each rank whose
// plan says probe connects to its targets and reports what it found. Every
// rank that took part (but `off`, which waits for nobody) gets, at once or
// at timeout_ms: a plan of `step` (when it was answered one), with targets
// by rank `targets` (when not empty), then `code`; and `words` exactly
// (before expand(); {port} is the first refusing rank's port): the error's
// message, or the skipped plan's note.
struct PreflightCase {
  std::string name{};
  int world = 3;
  std::vector<int> refusing{};
  int goes = -1;
  Going how = Going::init_failed;
  std::string reason{};
  int off = -1;
  int silent = -1;
  bool one_host = false;
  uint32_t timeout_ms = 10000;
  rv::PreflightStep step = rv::PreflightStep::probe;
  std::vector<std::vector<int32_t>> targets{};
  cc_result_t code = CC_SUCCESS;
  std::string words{};
};

std::vector<PreflightCase> preflight_cases();
void check_preflight_case(const Connect& connect, const PreflightCase& c, const BackendWords& b);

// cc's own server on loopback, and connections to it for a job.
struct LoopbackServer {
  std::unique_ptr<rv::Server> server;
  LoopbackServer();
  Connect connect(const std::string& job) const;
};

}  // namespace cc::test
