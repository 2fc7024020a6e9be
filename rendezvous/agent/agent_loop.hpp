// A node agent's core on an Asio io_context: its connection to cc's
// rendezvous server (connected with retries until a deadline), its one
// timer (heartbeats, ends awaiting an exit status), and one flush after each
// burst of input, so what the node's ranks sent together goes in one Relay.
// The ranks' side is the driver's (node_agent.cpp: a Unix socket; the
// simulation in cc-rendezvous-bench: ranks in memory), behind RankSide.
//
// With a locator (an elected server) the loop follows the election when the
// core does (AgentCore::following): it asks the locator where the server is
// now, on a thread of its own since the answer comes from etcd, and connects
// there, again until the core reaches the next server or gives it up.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include "common/backoff.hpp"
#include "common/status.hpp"
#include "rendezvous/agent/agent_core.hpp"
#include "rendezvous/agent/stream.hpp"
#include "rendezvous/tls/asio_stream.hpp"
#include "rendezvous/tls/context.hpp"

namespace cc::rv::agent {

class RankSide {
 public:
  virtual ~RankSide() = default;
  virtual void to_rank(LocalId rank, std::span<const uint8_t> bytes) = 0;
  virtual void close_rank(LocalId rank) = 0;
};

struct UpstreamTarget {
  std::vector<asio::ip::tcp::endpoint> endpoints;  // tried in turn
  std::string where;                               // "host:port", for messages
  Clock::time_point deadline;                      // for connecting
  size_t read_size = 16 * 1024;                    // the most one read of it takes
  // The local address to connect from; unset: the system's choice. The
  // simulation gives each node a loopback address of its own, as nodes on
  // different hosts have.
  std::optional<asio::ip::address> source{};
  // Not null: TLS to the server, whose certificate must name `host`.
  std::shared_ptr<tls::ClientContext> tls{};
  std::string host{};
  // Not empty: where the elected server is now (blocking; it may be asked
  // from another thread), asked after the connection is lost.
  using Locate = std::function<Status(Clock::time_point deadline, std::string* host, int* port)>;
  Locate locate{};
};

class AgentLoop final : private AgentIo {
 public:
  AgentLoop(asio::io_context& io, AgentOptions options, RankSide& ranks, UpstreamTarget target);
  ~AgentLoop() override;
  AgentLoop(const AgentLoop&) = delete;
  AgentLoop& operator=(const AgentLoop&) = delete;

  // Starts connecting to the server.
  void start();
  // Stops: the connection to the server closes (the server then fails the
  // ranks still open, as for a lost node).
  void stop();
  // Goes silent without closing its connection, as a node that hangs: the
  // server fails its ranks when the agent's heartbeat window passes.
  void freeze();

  AgentCore& core() { return core_; }
  // Call after feeding the core from the ranks' side: one flush per burst,
  // and the timer moved to the core's next deadline.
  void after_input();

 private:
  void to_upstream(std::vector<uint8_t> bytes) override;
  void close_upstream() override;
  void to_rank(LocalId rank, std::span<const uint8_t> bytes) override;
  void close_rank(LocalId rank) override;

  void connect_next();
  void connected();
  void arm_timer();
  // While the core follows the election: asks the locator (once at a time)
  // and connects to the server it names.
  void follow();
  // The connection could not be made, or ended: the core is told, and
  // follows the election when it does.
  void lost(const std::string& why);
  void located(Status s, const std::string& host, int port,
               std::vector<asio::ip::tcp::endpoint> endpoints);

  asio::io_context& io_;
  RankSide& ranks_;
  UpstreamTarget target_;
  AgentCore core_;
  asio::ip::tcp::socket connecting_;
  std::shared_ptr<Stream<tls::AsioStream>> upstream_;
  std::vector<std::vector<uint8_t>> early_;  // written before the connection was up
  size_t next_endpoint_ = 0;
  int attempts_ = 0;
  std::string last_error_ = "no attempt was made";
  Backoff backoff_;
  asio::steady_timer retry_timer_, timer_;
  Clock::time_point armed_for_ = Clock::time_point::max();
  bool flush_posted_ = false;
  bool stopped_ = false;
  uint64_t link_ = 0;        // the connection to the server now; callbacks of an older one are ignored
  bool seeking_ = false;     // the locator is asked, or the server it named is dialled
  std::thread locator_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cc::rv::agent
