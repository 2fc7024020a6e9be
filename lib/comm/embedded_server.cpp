#include "lib/comm/embedded_server.hpp"

#include <map>
#include <mutex>
#include <utility>

#include "common/log.hpp"
#include "rendezvous/server.hpp"
#include "rendezvous/tls/env.hpp"

namespace cc::comm {

bool server_in_rank0(const rv::factory::Address& address, int rendezvous_mode) {
  return address.server().has_value() && rendezvous_mode != CC_RENDEZVOUS_EXTERNAL;
}
namespace {

struct Entry {
  std::unique_ptr<rv::Server> server;
  int refs = 0;
};

std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::map<int, Entry>& registry() {
  static std::map<int, Entry> r;
  return r;
}

}  // namespace

Status EmbeddedServerRef::acquire(const std::string& bind_addr, int port, const std::string& token,
                                  const rv::tls::ServerFiles& tls,
                                  std::unique_ptr<EmbeddedServerRef>* out,
                                  std::chrono::milliseconds job_ttl) {
  std::lock_guard<std::mutex> lock(registry_mu());
  auto it = registry().find(port);
  if (it == registry().end()) {
    rv::ServerOptions options;
    options.bind_addr = bind_addr;
    options.port = port;
    options.token = token;
    options.job_ttl = job_ttl;
    // TLS when a certificate and key are given (a client CA: mTLS).
    Status st = rv::tls::server_context_for(tls, &options.tls);
    std::unique_ptr<rv::Server> server;
    if (st.ok()) st = rv::Server::start(options, &server);
    if (!st.ok()) {
      return make_status(st.code,
                         "could not start the embedded rendezvous server on " + bind_addr + ":" +
                             std::to_string(port) + ": " + st.message +
                             ". If another program (or an earlier job) holds the port, choose "
                             "another MASTER_PORT, or set CC_RENDEZVOUS=external to use a "
                             "running cc-rendezvous");
    }
    log().debug("embedded rendezvous server listening on {}:{}", bind_addr, server->port());
    it = registry().emplace(port, Entry{std::move(server), 0}).first;
  }
  ++it->second.refs;
  out->reset(new EmbeddedServerRef(port));
  return Status::success();
}

void EmbeddedServerRef::release(const std::string& job_id, std::chrono::milliseconds idle_timeout) {
  if (released_) return;
  released_ = true;
  std::unique_ptr<rv::Server> last;
  {
    std::lock_guard<std::mutex> lock(registry_mu());
    auto it = registry().find(port_);
    if (it == registry().end()) return;
    if (--it->second.refs > 0) return;
    last = std::move(it->second.server);
    registry().erase(it);
  }
  if (!job_id.empty() && idle_timeout.count() > 0 && !last->wait_job_idle(job_id, idle_timeout)) {
    log().warn(
        "stopping the embedded rendezvous server on port {} while ranks of job '{}' are "
        "still connected (they did not leave within {} ms)",
        port_, job_id, idle_timeout.count());
  }
  last->stop();
}

EmbeddedServerRef::~EmbeddedServerRef() { release("", std::chrono::milliseconds(0)); }

}  // namespace cc::comm
