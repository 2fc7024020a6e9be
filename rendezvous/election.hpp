// Who hosts cc's server when the rendezvous address names an etcd cluster.
// Candidates campaign for a scope: "" for the cc-rendezvous daemons started
// with --etcd, a job id for a job with no daemon (its cc-run agents and
// ranks). The winner holds a lease, publishes the address its server
// listens on, and keeps the store durable through its Leadership; clients
// read the address and speak cc's own protocol to it. The etcd
// implementation is rendezvous/etcd/election.hpp; no I/O here.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/durable.hpp"

namespace cc::rv {

using ElectionDeadline = std::chrono::steady_clock::time_point;

// Held while leading. Its writes (Durable) are fenced by the lease: once
// the lease is lost, every write fails.
class Leadership : public Durable {
 public:
  // False once the lease was lost or was not renewed in time. A server that
  // sees false must answer nothing more and stop.
  virtual bool leading() const = 0;
  // Called once, from the lease's keeper thread, when leadership is lost.
  // Set it before serving.
  virtual void on_lost(std::function<void()> callback) = 0;
  // Gives the lead up: the published address goes at once, so the next
  // candidate need not wait for the lease to end. Idempotent.
  virtual void resign() = 0;
};

class Election {
 public:
  virtual ~Election() = default;
  // The address the leader of `scope` published; empty when none leads.
  // Errors: CC_ERR_RENDEZVOUS or CC_ERR_TIMEOUT naming etcd.
  virtual Status leader(const std::string& scope, ElectionDeadline deadline,
                        std::string* address) = 0;
  // One try to lead `scope`, publishing `address`: *won is set when this
  // candidate leads, left empty when another does.
  virtual Status campaign(const std::string& scope, const std::string& address,
                          ElectionDeadline deadline, std::unique_ptr<Leadership>* won) = 0;
  // Whether cc-rendezvous daemons serve this cluster's jobs (a daemon said
  // so when it first started): then a job never hosts its own server, and
  // its clients wait for a daemon to lead.
  virtual Status daemons_serve(ElectionDeadline deadline, bool* yes) = 0;
  virtual Status declare_daemons(ElectionDeadline deadline) = 0;
  // "etcd at 127.0.0.1:2379, ...", for messages.
  virtual std::string where() const = 0;
  // How long a leader that vanished keeps its scope (the lease's TTL).
  virtual std::chrono::milliseconds lease() const = 0;
};

}  // namespace cc::rv
