// The rendezvous server: Asio, asynchronous, one io_context thread, no thread
// per connection. Used by cc-rendezvous, by cc_server_start() and by rank 0's
// embedded server. The per-connection logic lives in ServerCore (no sockets).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "common/token_file.hpp"
#include "rendezvous/durable.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/server_metrics.hpp"
#include "rendezvous/tls/context.hpp"

namespace cc::rv {

struct ServerOptions {
  std::string bind_addr = "0.0.0.0";  // "::" listens on IPv6 (and IPv4 where dual-stack)
  int port = 0;                       // 0 = any free port
  std::string token;                  // empty = no authentication (logs a warning)
  // Tokens per job prefix (--token-file's table): a job with a matching
  // prefix proves its own token (or `token`, the admin's), and a status
  // connection with it sees those jobs alone.
  std::vector<JobToken> job_tokens;
  Limits limits;
  std::chrono::milliseconds handshake_timeout{10000};  // connect to authenticated Hello
  std::chrono::milliseconds frame_timeout{10000};      // first to last byte of one frame
  std::chrono::milliseconds heartbeat_timeout{0};      // 0 = do not track heartbeats
  // A connection the server closes (a drop, a refusal, a stop) may take this
  // long to write its last replies; then it is closed, read or not. A stop
  // takes at most this long, and a second.
  std::chrono::milliseconds drain_timeout{2000};
  // An authenticated connection that holds nothing on the server (no
  // communicator membership, no pending join, no parked get or wait) and has
  // sent no frame for this long is closed. 0 = never (the default: a store
  // client may stay silent between its calls for as long as it likes).
  std::chrono::milliseconds idle_timeout{0};
  // A job's keys outlive its connections: they are kept until deleted, or
  // until the job has had no connection for job_ttl. 0 = for the server's
  // lifetime. A job's communicator state is forgotten when its last rank has
  // left, whatever this says.
  std::chrono::milliseconds job_ttl{std::chrono::hours(1)};
  size_t max_connections = 100000;
  size_t max_jobs = 10000;  // with or without a connection
  size_t max_keys_per_job = 100000;
  // Bytes of keys and values together, per job and over every job. A write
  // past a limit is refused with a message; nothing is ever evicted.
  size_t max_bytes_per_job = size_t{64} << 20;
  size_t max_total_bytes = size_t{1} << 30;
  // Gets and Waits parked until their keys are set, each counted as its
  // keys' bytes plus ServerCore::kParkedCost: per connection, per job and
  // over every job. One past a limit is refused with a message; nothing parked
  // is dropped.
  size_t max_parked_bytes_per_connection = size_t{4} << 20;
  size_t max_parked_bytes_per_job = size_t{64} << 20;
  size_t max_parked_bytes_total = size_t{256} << 20;
  // Where store writes are kept before they are answered, and read back from
  // at start (rendezvous/durable.hpp): the elected leader's etcd. Null: in
  // memory only.
  std::shared_ptr<Durable> durable;
  // Asked before each batch of input once set: false when this server no
  // longer leads, and then it answers nothing more and stops.
  std::function<bool()> still_leading;
  // Failover: this server takes over the jobs of one that went away. Its
  // clients resume (protocol.hpp, Resume) and it rebuilds each communicator
  // generation from their resumes. For resume_grace from its start nobody
  // is declared failed for not being there; then the members that never
  // resumed are announced as failed to the others, as a dropped connection
  // is. A server that is no successor refuses resumes.
  bool successor = false;
  std::chrono::milliseconds resume_grace{5000};
  // Not null: every connection speaks TLS 1.3 with this context (its
  // certificate, and under mTLS the CA of the clients'); reload() on it
  // serves new handshakes the new certificate. Null: clear text.
  std::shared_ptr<tls::ServerContext> tls;
};

// How a server stops (Server::stop). fail: every waiting request is
// answered with an error and members are told the server stops, so ranks
// fail (clients with a locator move to the next server instead). handover:
// a successor takes over: nothing is answered or announced, every client is
// told the server stops and its connection closed, so clients with a
// locator resume on the successor; those without one see the server gone.
enum class StopMode : uint8_t { fail, handover };

class Server {
 public:
  // Binds, listens and starts the io thread. A taken port is CC_ERR_SYSTEM
  // whose message names the port and what to do.
  static Status start(const ServerOptions& options, std::unique_ptr<Server>* out);

  virtual ~Server() = default;  // stops if still running
  virtual int port() const = 0;
  // Stops accepting, releases every waiting client with an error, closes all
  // connections and joins the io thread. Idempotent.
  virtual void stop() = 0;
  // This server no longer leads (its election's lease is lost): every
  // connection is closed unanswered and nothing more is read or written,
  // so clients reconnect to the next leader. Call stop() after it. Any thread.
  virtual void abandon() = 0;
  // The same, as `mode` says (StopMode::fail is stop()).
  virtual void stop(StopMode mode) = 0;
  // Blocks until stop() has finished (from another thread or a signal).
  virtual void wait() = 0;
  // Blocks until no connection of job_id is a communicator member any more
  // (all left or vanished), or until timeout; true when idle. Rank 0 calls it
  // before stopping its embedded server, so the others can leave cleanly.
  virtual bool wait_job_idle(const std::string& job_id, std::chrono::milliseconds timeout) = 0;
  // The server's counters and gauges, copied on its thread; nullopt when it
  // has stopped or did not answer within timeout.
  virtual std::optional<ServerMetrics> metrics(std::chrono::milliseconds timeout) = 0;
  // New connections must prove these tokens from now on (none: no token);
  // those already in keep going. False when the server has stopped or did not
  // take them within timeout, and then the tokens in force stay: a change the
  // io thread had not reached by the timeout is withdrawn, never applied later.
  virtual bool set_tokens(const Tokens& tokens, std::chrono::milliseconds timeout) = 0;
  bool set_token(const std::string& token, std::chrono::milliseconds timeout) {
    return set_tokens(Tokens{token, {}}, timeout);
  }
};

}  // namespace cc::rv
