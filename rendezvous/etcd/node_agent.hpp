// A node's agent on etcd: what cc-run does for the ranks it started when the
// job's rendezvous is an etcd cluster, so that etcd holds one lease, one
// keepalive and one watch stream per node instead of per rank
// (docs/ETCD.md, "Node agents"). node_agent_server.hpp puts it on a Unix
// socket for real ranks (node_link.hpp); cc-etcd-rendezvous-bench drives it
// directly for simulated ones.
//
// - The node's lease: granted at start, kept alive here (every TTL/3); every
//   rank of the node puts its keys on it. When it expires (the agent died,
//   stalled or was cut off), every key of the node goes at once.
// - Claims: the ranks' join transactions that arrive while one is in flight
//   (or within `gather` of the first) go to etcd as one transaction, their
//   conditions and puts together; when that one fails or is refused, each
//   goes alone, so each rank gets exactly the answer it would have had.
// - One watch stream: the ranks' watches are merged by key range (a
//   generation's news/ prefix is watched once for all its ranks here), each
//   rank getting the events from its own start revision.
// - A rank's end: the ranks tell which keys they put on the lease and of
//   which generation they are members; when a rank's process ends without
//   leaving, the agent tells the others at once, in the words it has (the
//   exit status), and deletes that rank's keys, as a lease's end would.
//
// Threads: every call may come from any thread; one keeper thread (the
// lease's keepalives, never held up behind a claim), one worker thread (the
// claims, the announcements) and one watch thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "rendezvous/etcd/backend.hpp"
#include "rendezvous/etcd/client.hpp"
#include "rendezvous/etcd/node_messages.hpp"

namespace cc::rv::etcd::node {

struct AgentOptions {
  // Where etcd is and how to reach it, as a rank's backend has them; its
  // heartbeat_window is the node lease's TTL (rounded up to whole seconds).
  BackendOptions backend;
  std::string host;  // this node, for words
  uint32_t pid = 0;  // the agent's process
  // Claims in one transaction at most (etcd takes 128 operations a side).
  size_t max_claims = 40;
  // How long the first claim of a batch waits for the node's others.
  std::chrono::milliseconds gather{2};
};

using RankId = uint64_t;  // one connection of a rank's process to the agent

class Agent {
 public:
  // Grants the node's lease (which proves etcd reachable) and starts the
  // threads. Errors: those of the etcd client, naming etcd.
  static Status start(const AgentOptions& options, std::unique_ptr<Agent>* out);
  ~Agent();  // revokes the lease: the node's ranks are gone with it
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  int64_t lease() const;
  int64_t lease_ttl() const;  // seconds, as granted
  // "cc-run, pid 777, on host node-3": the node in the others' words.
  const std::string& node_words() const;

  // A transaction (the gateway's JSON request) of a rank's claim; `done` gets
  // etcd's answer (JSON text) or the failure, from the worker thread.
  using ClaimDone = std::function<void(const Status& status, const std::string& answer)>;
  void claim(json request, ClaimDone done);

  // Events matching `specs` (each from its own start revision), WatchEvent::spec
  // indexing `specs`, until unsubscribe(); from the watch thread.
  using Sink = std::function<void(std::vector<WatchEvent> events)>;
  uint64_t subscribe(std::vector<WatchSpec> specs, Sink sink);
  void unsubscribe(uint64_t id);

  // What a rank tells of itself (node_messages.hpp).
  void own(RankId rank, std::string key);
  void member(RankId rank, Membership m);
  void left(RankId rank, const std::string& generation);
  void ended(RankId rank, const std::string& generation);
  // The rank's process ended without leaving (`words`: how, "exited with
  // signal 9 (killed)"): its membership's departure is told and its keys
  // deleted, on the worker thread.
  void rank_gone(RankId rank, const std::string& words);

  // Called (from the keeper thread) when the node's lease expired: a new one
  // is granted first; the ranks' keys on the old one are gone.
  void on_lease_lost(std::function<void(int64_t old_lease)> observer);

  // Called (from the keeper thread) after each keepalive etcd answered.
  void on_lease_kept(std::function<void()> observer);

  // Stops the keepalives, as a hung node's agent would (the simulation's).
  void freeze();

  // Work done, for a simulation's report.
  struct Counts {
    uint64_t transactions = 0;  // sent to etcd, batches and single claims
    uint64_t claims = 0;
    uint64_t streams = 0;  // watch streams opened
    // Ranges the stream watched before, opened again from the present: a
    // read showed nothing they react to happened since (node_watch.cpp).
    uint64_t resumed_from_present = 0;
  };
  Counts counts() const;

  struct Impl;

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cc::rv::etcd::node
