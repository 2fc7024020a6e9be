// The rendezvous server's state machine, without sockets: connections,
// handshake and authentication, jobs and their keys, parked waits, communicator
// joins, membership events and every deadline. The I/O layer (server.cpp)
// feeds it connects, bytes, disconnects and the clock; the core answers
// through a Sink. One thread drives it, so it takes no locks. Tests and the
// fuzz target drive it directly. Its state and its sections live in
// rendezvous/server_core/ (state.hpp says which file does what).
//
// Protocol rules the core enforces (the client follows them):
// - The first frame is Hello, answered with Challenge (request_id of Hello).
// - With a token, the next frame is Auth, answered with Ok, or with
//   Error(CC_ERR_AUTH) and a closed connection.
// - Nothing of any job is readable or writable before that.
// - Get/Wait with timeout_ms > 0 are parked and answered when their keys are
//   set, or with Error(CC_ERR_TIMEOUT) at the deadline; one past a limit on
//   parked requests is refused with a message. Join with timeout_ms 0
//   waits without a server-side deadline.
// - Leave ends a membership cleanly: no event is sent to the other members
//   (so a job of N ranks that finishes costs O(N), not O(N^2) messages).
// - A member that drops without Leave, misses heartbeats or sends Abort is
//   announced to every other member of its generation of its communicator
//   (request_id 0), once. Each generation hears of at most
//   kMaxAnnouncedFailures ranks; later failures are logged only (its members
//   already know it is broken).
// - Recover and a Join of a completed communicator are its recovery: the
//   server decides the membership of each next generation
//   (server_core/recovery.cpp states the rules).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rendezvous/protocol.hpp"
#include "rendezvous/server.hpp"
#include "rendezvous/server_metrics.hpp"

namespace cc::rv {

using ConnId = uint64_t;
using Clock = std::chrono::steady_clock;

// Where the core's output goes. Calls happen inside the core's calls; a Sink
// must not call back into the core.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void send(ConnId conn, uint32_t request_id, const Message& message) = 0;
  // A Get's answer: the value's bytes, valid only during the call. A sink
  // that encodes frames overrides it to copy them once (append_value_frame).
  virtual void send_value(ConnId conn, uint32_t request_id, std::span<const uint8_t> value) {
    send(conn, request_id, Value{{value.begin(), value.end()}});
  }
  // The connection is a node agent's: the core bounds what waits for each
  // of its ranks (ServerCore::kMaxQueuedReplies) and reads on_written, so
  // the I/O layer bounds the connection only within its total.
  virtual void carries_ranks(ConnId conn) { (void)conn; }
  // The core has forgotten this connection: flush what was sent, then close.
  virtual void close(ConnId conn, const std::string& reason) = 0;
  // No connection of job_id is a member or a joiner any more.
  virtual void job_idle(const std::string& job_id) { (void)job_id; }
};

class ServerCore {
 public:
  static constexpr size_t kMaxAnnouncedFailures = 16;
  // The reason the I/O layer gives when a client closed its connection (end
  // of stream), for on_disconnect.
  static constexpr const char* kClientClosed = "the client closed the connection";
  // What the store limits count for a key beyond its key's and value's
  // bytes: the server's hash node, bucket and heap chunks for it (measured:
  // 74 to 142 bytes with glibc 2.36 on x86-64, docs/RENDEZVOUS.md).
  static constexpr size_t kKeyOverhead = 128;
  // Answers to parked requests, and deadlines fired, that one call into the
  // core gives at most; the rest follow in the next calls of expire(), which
  // next_deadline() asks for at once. So one Set that wakes 100k waiters, or
  // 100k deadlines that pass together, never hold the I/O thread for long.
  static constexpr size_t kAnswersPerTurn = 2048;
  // The bytes of values that one call into the core answers at most: a
  // connection's further Gets wait in its buffer for the next call (a
  // deadline due at once), so Gets of a large value, 60 of 1 MiB in one read,
  // never copy more than this in one event.
  static constexpr size_t kValueBytesPerTurn = size_t{4} << 20;
  // What a parked Get or Wait counts as holding besides its keys' bytes, for
  // the limits on parked requests (ServerOptions::max_parked_bytes_*).
  static constexpr size_t kParkedCost = 512;
  // The largest frame a connection may send before its handshake is done (a
  // Hello is at most about 12 KiB, an Auth 40 bytes).
  static constexpr size_t kMaxHandshakeFrame = size_t{16} << 10;
  // The bytes of frames not yet complete, over every connection: past it, a
  // connection that holds more than kSmallFrame of one is dropped.
  static constexpr size_t kMaxIncompleteFrames = size_t{256} << 20;
  static constexpr size_t kSmallFrame = size_t{64} << 10;
  // A client that does not read is dropped once this much of its replies
  // waits to be written; a rank behind a node agent is bounded alone, its
  // channel ended, its agent's link kept.
  static constexpr size_t kMaxQueuedReplies = size_t{64} << 20;

  ServerCore(const ServerOptions& options, Sink& sink);
  ~ServerCore();
  ServerCore(const ServerCore&) = delete;
  ServerCore& operator=(const ServerCore&) = delete;

  // A new connection; `peer` is "address:port" for messages. False when it
  // was refused (over max_connections): an Error was sent and close called.
  // `closing`: connections the I/O layer still holds after the core forgot
  // them (their last replies draining); they count against max_connections.
  bool on_connect(ConnId conn, const std::string& peer, Clock::time_point now, size_t closing = 0);
  void on_bytes(ConnId conn, std::span<const uint8_t> bytes, Clock::time_point now);
  // The peer closed or the socket failed; `reason` says how ("end of stream").
  // A member whose client closed the connection (kClientClosed) without a
  // Leave is announced in rules::closed_without_leaving_words(), the message
  // every backend tells the others for a member gone so.
  void on_disconnect(ConnId conn, const std::string& reason, Clock::time_point now);
  // The same, at the time of the latest call into the core.
  void on_disconnect(ConnId conn, const std::string& reason);
  // The I/O layer wrote `bytes` of what the core handed it for conn (only
  // needed for connections named to Sink::carries_ranks).
  void on_written(ConnId conn, size_t bytes);
  // Fires every deadline at or before now.
  void expire(Clock::time_point now);
  // The earliest pending deadline, for the I/O layer's one timer.
  std::optional<Clock::time_point> next_deadline() const;
  // A server that takes over, before its first connection: the keys and
  // sessions its durable store kept (ServerOptions::durable), then
  // restored(), from when the restored jobs' TTLs count.
  void restore(const DurableWrite& key);
  void restore(const DurableSession& session);
  void restored(Clock::time_point now);
  // Releases every parked request with an error, tells members the server is
  // stopping and closes every connection. StopMode::handover answers and
  // announces nothing (ServerOptions, StopMode).
  void stop(StopMode mode = StopMode::fail);

  // Connections of the I/O layer (node agents' included), and the ranks the
  // agents carry besides.
  size_t connection_count() const;
  size_t relayed_rank_count() const;
  // Jobs the server holds, with or without a connection.
  size_t job_count() const;
  bool job_exists(const std::string& job_id) const;
  size_t job_key_count(const std::string& job_id) const;
  // True while the job holds communicator state (a generation, complete,
  // joining or failed).
  bool job_has_communicators(const std::string& job_id) const;
  // True while some connection of the job is a member or a pending joiner.
  bool job_busy(const std::string& job_id) const;
  // Last completed operation each member reported by heartbeat, by rank, for
  // one communicator (comm_number) of a job and one generation of it
  // (empty when unknown).
  std::map<int32_t, uint64_t> member_progress(const std::string& job_id, uint32_t comm_number,
                                              uint32_t generation = 0) const;

  // The counters and the gauges of this moment, for the metrics endpoint.
  ServerMetrics metrics(Clock::time_point now) const;
  // The I/O layer counts what only it sees (bytes written, clients that do
  // not read) here.
  ServerCounters& counters();
  // From now on a Hello is challenged with this token (empty: none). Members
  // and connections already authenticated are not asked again.
  void set_token(const std::string& token) { set_tokens(Tokens{token, {}}); }
  // The same with tokens per job prefix (ServerOptions::job_tokens).
  void set_tokens(const Tokens& tokens);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cc::rv
