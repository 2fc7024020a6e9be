// The rendezvous on etcd: the store (rendezvous/store.hpp) and the
// membership (rendezvous/membership.hpp) with the same semantics and the
// same error words as cc's own server, kept in etcd under a prefix per job
// (keys.hpp). rendezvous/factory makes it for an etcd:// or etcds:// address.
//
// How each operation maps onto etcd, and what it costs per rank (keys.hpp
// has the layout, docs/ETCD.md the whole story):
// - store set/get/add/wait/delete/compare-set: one put, range or transaction
//   each; a get or wait that waits opens one watch on its keys (no polling).
//   add and compare-set are transactions on the key's revision or value; each
//   also records its own id next to the key, so a write retried on another
//   endpoint after an answer was lost is recognised as done, never done twice.
// - join: one lease grant (the membership lease, whose TTL is the heartbeat
//   window) and one transaction that claims member/<rank> on it, unless the
//   rank is taken or the generation has ended. Rank 0 reads who came before
//   it, watches the others arrive, checks each as cc's server checks a join
//   (world size, range, NCCL major.minor, one GPU per host) and puts the
//   result: the only O(n) work, once per generation. A failure anywhere puts
//   a failed result, which every rank gets, in the same words.
// - every rank has one watch stream from its join to its leave, on three
//   single keys: the result, the events key (each departure), and the next
//   rank's member key. A lease that expires (a rank died or was cut off)
//   deletes that key; the previous rank in the ring announces it on the events
//   key, once. An abort, an init failure (init_failed, with the rank's words),
//   or a rank that goes without leaving, announces itself.
//   A clean leave first moves the member key off the lease, so it tells
//   nobody, as cc's server does; the last rank to leave removes the
//   generation's keys. An aborted rank keeps its lease (it may recover).
// - calls compared (CC_CHECK_CALLS): each rank puts its latest points on
//   gen/<g>/calls/<rank> (on its lease) when a heartbeat carries some; only
//   the generation's rank 0 watches that prefix and feeds the rule of cc's
//   server (rendezvous/rules/call_check); the first difference is put once on
//   gen/<g>/mismatch, a single key in every rank's watch stream, which
//   becomes the same mismatch peer event on every rank.
// - deadline: the first rank whose join deadline passes (or rank 0's
//   coordinator) names the ranks that never came.
// - recover (cc_comm_shrink, cc_comm_regrow) and replacements: see
//   backend_recover.cpp; its rules alone are recovery_decision.hpp.
//
// Threads: calls may come from several threads at once (as with cc's own
// client); peer events are queued for next_event().
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "rendezvous/client.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::rv::etcd {

struct BackendOptions {
  std::string address;  // etcd://host:port[,host:port...] or etcds://...
  std::string job_id = "default";
  std::string prefix = "cc";  // the root of cc's keys in etcd
  std::string ca_file;        // etcds://: see ClientOptions
  std::string cert_file;
  std::string key_file;
  std::string auth_file;  // "user:password"
  std::string local_address;  // connections from this address: see ClientOptions
  // Reaching etcd (and authenticating) at connect.
  std::chrono::milliseconds connect_timeout{30000};
  // A request that does not wait by design (set, add, ...).
  std::chrono::milliseconds request_timeout{30000};
  // The membership lease's TTL (rounded up to whole seconds; etcd raises it to
  // its own minimum). set_heartbeat_window() may change it.
  std::chrono::milliseconds heartbeat_window{5000};
  // One attempt on one endpoint: connecting, and waiting for the answer.
  std::chrono::milliseconds attempt_connect_timeout{2000};
  std::chrono::milliseconds attempt_timeout{2000};
  // A rank that will join a communicator: connect takes its membership lease
  // (which proves etcd reachable) instead of asking for the member list.
  bool member = false;
  // cc-run's node agent (CC_AGENT_SOCKET; empty: none): a member takes the
  // node's lease and joins through the agent (node_link.hpp).
  std::string agent_socket;
};

// cc-run's node agent on etcd (node_agent_server.hpp), as cc-run asks the
// plugin for it: where etcd is, as a rank's backend has it (its
// heartbeat_window: the node lease's TTL), and this node for words.
struct NodeAgentStart {
  BackendOptions backend;
  std::string host;
  uint32_t pid = 0;
};

class Backend final : public cc::rv::Client {
 public:
  // Parses the address, reads the auth file and asks etcd for its members
  // (authenticating when asked to), until connect_timeout. Errors:
  // CC_ERR_INVALID_ARGUMENT (address, files), CC_ERR_AUTH, CC_ERR_RENDEZVOUS
  // naming etcd and its endpoints.
  static Status connect(const BackendOptions& options, std::unique_ptr<Backend>* out);
  // Revokes the membership lease when the rank never left: the others are
  // told at once, as when a rank's connection to cc's server drops.
  ~Backend() override;

  Status set(const std::string& key, std::span<const uint8_t> value) override;
  Status get(const std::string& key, std::vector<uint8_t>* value, uint32_t timeout_ms) override;
  Status add(const std::string& key, int64_t delta, int64_t* result) override;
  Status wait(const std::vector<std::string>& keys, uint32_t timeout_ms) override;
  Status del(const std::string& key) override;
  // Sets key to desired when its value equals *expected (expected null: only
  // when the key is absent); *swapped says whether it did.
  Status compare_set(const std::string& key, const std::vector<uint8_t>* expected,
                     std::span<const uint8_t> desired, bool* swapped) override;

  // Joined carries the unique id; its member list stays empty (every rank
  // reading all n members would cost n^2 bytes): progress() names one.
  Status join(const Join& request, Joined* out) override;
  Status leave() override;
  // cc_comm_shrink and cc_comm_regrow on etcd, by the rules of cc's server
  // (rendezvous/server_core/recovery.cpp), on this connection's own lease
  // (backend_recover.cpp has how).
  Status recover(const Recover& request, const MakeId& make_id, Joined* out) override;
  // Heartbeats record the rank's progress here; the lease is kept alive by
  // the backend's own thread.
  Status heartbeat(uint64_t last_completed) override;
  Status heartbeat_nowait(uint64_t last_completed) override;
  // The same, with points of the rank's calls: written under the generation's
  // calls/ prefix (at most one put in flight; reports that come meanwhile
  // go together in the next), and compared by the generation's rank 0 with
  // cc's server's rule (backend_calls.cpp; docs/ETCD.md has the cost).
  Status heartbeat_with_calls_nowait(const Heartbeat& h) override;
  // Makes the membership lease's TTL `window` (a new lease when it differs).
  Status set_heartbeat_window(std::chrono::milliseconds window) override;
  // One member's host and pid (rank >= 0), from the generation's roster (read
  // once). etcd keeps no per-rank progress (it would cost a write per
  // heartbeat per rank): rank -1 says so.
  Status progress(uint32_t comm_number, int32_t rank, Progress* out,
                  std::chrono::milliseconds timeout) override;
  // The same for the generation this rank is a member of.
  Status progress_in(uint32_t comm_number, uint32_t generation, int32_t rank, Progress* out,
                     std::chrono::milliseconds timeout) override;
  void pump() override {}
  // When etcd last answered (keepalives answer every TTL/3).
  std::chrono::steady_clock::time_point last_heard() const override;
  Status abort(const std::string& reason) override;
  Status abort_nowait(const std::string& reason) override;
  // A communicator's start: init_failed puts this rank's words on the
  // generation's events key (the others get an init_failed peer event) and
  // revokes its membership lease. The etcd rendezvous runs no reachability
  // test: preflight_ready answers a skipped plan, preflight_report success.
  Status init_failed(uint32_t comm_number, const std::string& reason,
                     std::chrono::milliseconds timeout) override;
  Status preflight_ready(const PreflightReady& request, PreflightPlan* out) override;
  Status preflight_report(const PreflightReport& request) override;
  std::optional<PeerEvent> next_event(std::chrono::milliseconds timeout) override;
  // "etcd://host:port,..." as given.
  const std::string& endpoint() const override;
  // "the job's etcd rendezvous (etcd://...)"; when lost, check the cluster
  // and this host's network.
  std::string named() const override;
  std::string lost_advice() const override;

  struct Impl;

 private:
  explicit Backend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cc::rv::etcd
