// A node agent's state machine, without sockets: cc-run runs one on every
// node, between the ranks it started and cc's rendezvous server, so the
// server holds one connection per node instead of one per rank
// (docs/RENDEZVOUS.md, "Node agents").
//
// Each rank speaks the ordinary protocol to the agent over a local socket.
// The agent answers the rank's handshake itself (asking for the job's token
// when it has one), then opens a channel for it on its own connection to the
// server and carries the rank's frames there in Relay frames: what all its
// ranks sent since the last flush() goes as one Relay, and the server's
// Relay answers are handed to each rank. It answers the ranks' heartbeats
// itself and forwards only the latest of each rank at its own heartbeat, one
// Relay a node. A rank's end is told at once, with a message: its process exit
// ("exited with signal 9 (killed)", from process_exited()), or, when its
// connection ends without an exit heard within exit_grace, that it closed
// its connection. The agent heartbeats on its own connection; when the
// server no longer hears it, every rank of the node is failed together.
//
// The driver (node_agent.cpp for cc-run, the simulation of
// cc-rendezvous-bench) moves the bytes and calls tick() at next_deadline().
// One thread drives it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::rv::agent {

using Clock = std::chrono::steady_clock;
using LocalId = uint64_t;  // a rank's connection to the agent, named by the driver

struct AgentOptions {
  std::string job_id;  // the agent's own hello
  std::string token;   // the job's token: proved to the server, asked of the ranks (empty: none)
  std::string host;    // this node, for messages
  uint32_t pid = 0;
  std::string upstream;  // "host:port" of the rendezvous, for messages
  // Not zero: the server is elected (at `elected_by`, an etcd address) and
  // the agent follows it to the next leader for this long after losing it.
  // Zero: a lost server fails the node's ranks at once.
  std::chrono::milliseconds failover_timeout{0};
  std::string elected_by;
  // The agent's heartbeat, and the silence after which the server fails the node.
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_window{5000};
  // How long a rank whose connection ended waits for its process's exit status.
  std::chrono::milliseconds exit_grace{200};
  // A rank that has not said hello (and answered the challenge) by then is
  // closed with a message; one whose hello waits for the server is not.
  std::chrono::milliseconds handshake_timeout{10000};
  // Ranks connected at once; the next is refused with a message (the server's
  // bound on the ranks one agent carries).
  size_t max_ranks = 4096;
  Limits limits;
};

// What the core asks of its driver. Calls come from inside the core's calls.
class AgentIo {
 public:
  virtual ~AgentIo() = default;
  virtual void to_upstream(std::vector<uint8_t> bytes) = 0;
  // The agent gave the server up (an unreadable frame, a refusal, silence):
  // close the connection, after the calls it is in, so the server fails the
  // node's ranks at once rather than at its heartbeat window.
  virtual void close_upstream() {}
  virtual void to_rank(LocalId rank, std::span<const uint8_t> bytes) = 0;
  // Flush what was sent to the rank, then close its connection.
  virtual void close_rank(LocalId rank) = 0;
};

class AgentCore {
 public:
  AgentCore(AgentOptions options, AgentIo& io);
  ~AgentCore();
  AgentCore(const AgentCore&) = delete;
  AgentCore& operator=(const AgentCore&) = delete;

  // The connection to the server is up: the agent says hello.
  void upstream_connected(Clock::time_point now);
  void upstream_bytes(std::span<const uint8_t> bytes, Clock::time_point now);
  // The connection to the server ended, or could not be made (`why`, a
  // message naming the server). Ranks waiting for their handshake get that
  // message as an error; every rank's connection is closed.
  void upstream_lost(const std::string& why, Clock::time_point now);
  bool upstream_ready() const;
  // The connection to the server was lost and the agent follows the election:
  // the driver should find the next server and connect to it
  // (upstream_connected). False once it is connected again or given up.
  bool following() const;
  // The next server's address ("host:port"), as the driver found it, for
  // messages and the ranks' hellos.
  void upstream_moved(const std::string& where);
  // The message of the last upstream failure (empty while none).
  const std::string& upstream_failure() const;

  // A rank connected; pid and process group of the process at the other end
  // (0 when unknown).
  void rank_connected(LocalId rank, pid_t pid, pid_t group, Clock::time_point now);
  void rank_bytes(LocalId rank, std::span<const uint8_t> bytes, Clock::time_point now);
  // The rank's connection ended (end of stream or an error).
  void rank_closed(LocalId rank, Clock::time_point now);
  // The driver ends the rank (it does not read what it is sent): the server
  // is told why and its connection closes.
  void rank_cut_off(LocalId rank, const std::string& why, Clock::time_point now);
  // A process the driver started ended, as text ("exited with status 3"):
  // the ranks of its process group end with them.
  void process_exited(pid_t group, const std::string& words, Clock::time_point now);

  // Sends what the ranks sent since the last call as one Relay.
  void flush();
  // Heartbeats, and ranks whose exit status did not come in time.
  void tick(Clock::time_point now);
  Clock::time_point next_deadline() const;

  size_t rank_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cc::rv::agent
