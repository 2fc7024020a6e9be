// A rank's link to its node's agent on etcd (node_agent.hpp): the etcd
// backend of a rank that cc-run started (CC_AGENT_SOCKET) takes the node's
// lease instead of its own, sends its join's claim and its generation's
// watch through the agent (which batches and merges the node's), and tells
// the agent which keys it puts on the lease and which generation it belongs
// to, so that its death is told at once. Everything else (the store, the
// recovery, the calls) goes to etcd directly. node_messages.hpp has the
// lines.
//
// Threads: any call from any thread; one reader thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "rendezvous/etcd/client.hpp"
#include "rendezvous/etcd/node_messages.hpp"

namespace cc::rv::etcd::node {

class Link {
 public:
  // Errors: CC_ERR_RENDEZVOUS naming the socket (cc-run's agent is not there).
  static Status connect(const std::string& path, std::unique_ptr<Link>* out);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // The node's lease; *node names the agent for words ("cc-run, pid 777, on host h").
  Status lease(Deadline deadline, int64_t* id, int64_t* ttl_s, std::string* node);
  // As Client::txn, batched with the node's other claims.
  Status claim(const Txn& t, Deadline deadline, TxnResult* out);
  // As Client::watch, on the node's stream.
  Status watch(const std::vector<WatchSpec>& specs, Deadline deadline, WatchCancel* cancel,
               const Client::OnEvents& on_events);
  void own(const std::string& key);
  void member(const Membership& m);
  void left(const std::string& generation);
  void ended(const std::string& generation);

  // From the reader thread: the agent's connection ended (`why`), or the
  // node's lease expired. Set before the first request.
  void on_lost(std::function<void(const std::string& why)> observer);
  void on_lease_lost(std::function<void(int64_t old_lease)> observer);
  bool lost() const;
  // When the agent last said etcd answered it (its keepalives, every TTL/3).
  Clock::time_point last_heard() const;
  const std::string& path() const;

  struct Impl;

 private:
  explicit Link(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cc::rv::etcd::node
