// A blocking rendezvous client over one persistent TCP connection. Every call
// has a deadline. Calls are serialised by an internal mutex, so one client may
// be shared by threads; peer events the server pushes are queued (at most
// ClientInbox::kMaxEvents, past which the connection is given up with words)
// and taken with next_event().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::rv {

struct ClientOptions {
  std::string addr;  // IPv4, IPv6 ("::1" or "[::1]") or a host name
  int port = 0;
  std::string job_id = "default";
  std::string token;          // empty = none
  std::string client = "cc";  // free text sent in Hello
  // Total budget for connecting (retrying with backoff while refused) and the
  // handshake.
  std::chrono::milliseconds connect_timeout{30000};
  // Deadline for a request that does not wait by design (set, add, ...).
  std::chrono::milliseconds request_timeout{30000};
  // Not empty: the Unix socket of cc-run's node agent on this host, which
  // carries the connection's frames to the rendezvous at addr:port
  // (rendezvous/agent/agent_core.hpp); the client connects there instead.
  std::string agent_socket;
};

// A job id the server takes: at most Limits::max_key bytes. Else
// CC_ERR_INVALID_ARGUMENT naming `named` ("CC_JOB_ID", "config.job_id"), the
// id's first bytes and the limit.
Status check_job_id(std::string_view job_id, std::string_view named);

class Client {
 public:
  // Connects with retries and backoff until connect_timeout, then says Hello
  // and authenticates. Errors: CC_ERR_INVALID_ARGUMENT (a job id over its
  // limit), CC_ERR_RENDEZVOUS (naming addr:port and the cause), CC_ERR_AUTH,
  // CC_ERR_TIMEOUT.
  static Status connect(const ClientOptions& options, std::unique_ptr<Client>* out);
  virtual ~Client() = default;

  // Keys: an empty key, or one over Limits::max_key bytes, is
  // CC_ERR_INVALID_ARGUMENT before anything is sent; the connection stays
  // usable.
  virtual Status set(const std::string& key, std::span<const uint8_t> value) = 0;
  // Waits up to timeout_ms for the key (0 = no wait). A call that waits
  // (get, wait, join, recover, the reachability test) gives the server 250 ms
  // past its timeout for the server's answer to arrive, then returns
  // CC_ERR_TIMEOUT saying that the server did not answer.
  virtual Status get(const std::string& key, std::vector<uint8_t>* value, uint32_t timeout_ms) = 0;
  virtual Status add(const std::string& key, int64_t delta, int64_t* result) = 0;
  virtual Status wait(const std::vector<std::string>& keys, uint32_t timeout_ms) = 0;
  // Deleting an absent key succeeds.
  virtual Status del(const std::string& key) = 0;
  // Sets key to desired when its value equals *expected (expected null: only
  // when the key is absent); *swapped says whether it did.
  virtual Status compare_set(const std::string& key, const std::vector<uint8_t>* expected,
                             std::span<const uint8_t> desired, bool* swapped) = 0;

  // Joins a communicator's rendezvous; returns once every rank has joined.
  virtual Status join(const Join& request, Joined* out) = 0;
  virtual Status leave() = 0;
  // Leaves without waiting for the answer: safe where blocking on a slow or
  // unreachable server is not (destroying a failed communicator).
  virtual Status leave_nowait() { return leave(); }

  // Asks to go on in the next generation of a communicator (cc_comm_shrink,
  // cc_comm_regrow) on this connection, which must be no member yet; it
  // becomes the membership of that generation. When the server asks this
  // rank for the new NCCL id, make_id makes it. Returns once the server has
  // decided the generation, or its words why not. Backends without recovery
  // say so (CC_ERR_INVALID_USAGE).
  using MakeId = std::function<Status(std::vector<uint8_t>*)>;
  virtual Status recover(const Recover& request, const MakeId& make_id, Joined* out);
  virtual Status heartbeat(uint64_t last_completed) = 0;
  // Sends a heartbeat without waiting for its acknowledgement (the watchdog's
  // way: a cut cable must not stall it). The ack only refreshes last_heard().
  virtual Status heartbeat_nowait(uint64_t last_completed) = 0;
  // The same, carrying points of the member's calls for the server to
  // compare across ranks; a backend that compares none sends last_completed only.
  virtual Status heartbeat_with_calls_nowait(const Heartbeat& h) {
    return heartbeat_nowait(h.last_completed);
  }
  // Asks the server to announce this member as failed after window of silence.
  virtual Status set_heartbeat_window(std::chrono::milliseconds window) = 0;
  // Every member's last completed operation for one generation of the job.
  // rank -1: the other members furthest behind (see ProgressQuery).
  virtual Status progress(uint32_t comm_number, int32_t rank, Progress* out,
                          std::chrono::milliseconds timeout) = 0;
  // The same for one generation of a recovered communicator;
  // backends without recovery know generation 0 only.
  virtual Status progress_in(uint32_t comm_number, uint32_t generation, int32_t rank, Progress* out,
                             std::chrono::milliseconds timeout);
  // The members furthest behind (rank -1 above) and, where the backend
  // compares calls, where every member is in words (Progress::calls).
  virtual Status progress_with_calls(uint32_t comm_number, uint32_t generation, Progress* out,
                                     std::chrono::milliseconds timeout) {
    return progress_in(comm_number, generation, -1, out, timeout);
  }
  // The server's status report (see StatusQuery): its jobs, their
  // generations and members. A client made with an empty job id may ask
  // nothing else. A backend without it says so (CC_ERR_INVALID_USAGE).
  virtual Status status(const StatusQuery& query, StatusReport* out,
                        std::chrono::milliseconds timeout);
  // Reads what the server sent so far without blocking (for next_event(0)).
  virtual void pump() = 0;
  // When a byte last arrived from the server (the connect time before that).
  virtual std::chrono::steady_clock::time_point last_heard() const = 0;
  virtual Status abort(const std::string& reason) = 0;
  // Sends Abort without waiting for the answer: safe to call where blocking
  // on a slow or unreachable server is not (cc_comm_abort, the watchdog).
  virtual Status abort_nowait(const std::string& reason) = 0;

  // A communicator's start (protocol.hpp: InitFailed, PreflightReady,
  // PreflightReport). init_failed tells the others this member's init failed,
  // waiting up to `timeout` for the server to take it.
  virtual Status init_failed(uint32_t comm_number, const std::string& reason,
                             std::chrono::milliseconds timeout) = 0;
  // Sends where this member listens for the reachability test and waits for
  // its plan (request.timeout_ms, plus a grace for the server's own answer).
  // With request.enabled false it only sends, and *out says skipped.
  virtual Status preflight_ready(const PreflightReady& request, PreflightPlan* out) = 0;
  // Sends what this member's test found and waits for the verdict: success,
  // or the words naming who cannot reach whom.
  virtual Status preflight_report(const PreflightReport& request) = 0;

  // A peer event pushed by the server, waiting up to `timeout` for one.
  virtual std::optional<PeerEvent> next_event(std::chrono::milliseconds timeout) = 0;

  // "host:port" as given, for error messages.
  virtual const std::string& endpoint() const = 0;
};

}  // namespace cc::rv
