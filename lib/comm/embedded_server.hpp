// Rank 0's embedded rendezvous server, shared by every communicator of the
// process that uses the same port (a registry keyed by port, refcounted).
// No CUDA here.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/tls/context.hpp"

namespace cc::comm {

// Whether the job's rendezvous server lives in its rank 0: the address names
// cc's server and the job has none of its own (CC_RENDEZVOUS=embedded, the
// default). Never for an etcd address, whose election puts the server. The
// one place init, split, shrink and regrow ask.
bool server_in_rank0(const rv::factory::Address& address, int rendezvous_mode);

class EmbeddedServerRef {
 public:
  // Starts a server on bind_addr:port, or shares the one this process already
  // runs there. A port another program holds is CC_ERR_SYSTEM with a message.
  // job_ttl: how long a job's keys outlive its last connection (0: for the
  // server's lifetime) and tls (a certificate: TLS on): the server started
  // first decides.
  static Status acquire(const std::string& bind_addr, int port, const std::string& token,
                        const rv::tls::ServerFiles& tls, std::unique_ptr<EmbeddedServerRef>* out,
                        std::chrono::milliseconds job_ttl = std::chrono::milliseconds(0));
  // Drops this share. The last one waits (up to idle_timeout) for the
  // members of job_id to leave, then stops the server.
  void release(const std::string& job_id, std::chrono::milliseconds idle_timeout);
  ~EmbeddedServerRef();  // release("", 0) if not yet released

  int port() const { return port_; }
  EmbeddedServerRef(const EmbeddedServerRef&) = delete;
  EmbeddedServerRef& operator=(const EmbeddedServerRef&) = delete;

 private:
  explicit EmbeddedServerRef(int port) : port_(port) {}
  int port_;
  bool released_ = false;
};

}  // namespace cc::comm
