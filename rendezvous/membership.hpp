// A rank's membership of a communicator on a rendezvous: its join, the
// failures of the others pushed to it as peer events while it lives, its
// leave, its recovery into a new generation, and the questions a rank asks
// of it. Each backend implements it (rendezvous/frame_client.hpp over cc's
// server, rendezvous/etcd/backend.hpp over etcd); rendezvous/factory picks
// one from the address. Every call has a deadline; calls may come from
// several threads at once (the watchdog's heartbeats beside a caller's
// join), and peer events are queued for next_event().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::rv {

class Membership {
 public:
  virtual ~Membership() = default;

  // --- A member's life ---------------------------------------------------
  // Joins a communicator; returns once every rank has joined (or with the
  // message of the rule that refused it, or of the ranks that never came).
  virtual Status join(const Join& request, Joined* out) = 0;
  virtual Status leave() = 0;
  // Leaves without waiting for the answer: safe where blocking on a slow or
  // unreachable rendezvous is not (destroying a failed communicator).
  virtual Status leave_nowait() { return leave(); }
  // Asks to go on in the next generation of a communicator (cc_comm_shrink,
  // cc_comm_regrow) on this connection, which must be no member yet; it
  // becomes the membership of that generation. When the rendezvous asks
  // this rank for the new NCCL id, make_id makes it. Returns once the
  // generation is decided, or its message why not. Backends without recovery
  // say so (CC_ERR_INVALID_USAGE).
  using MakeId = std::function<Status(std::vector<uint8_t>*)>;
  virtual Status recover(const Recover& request, const MakeId& make_id, Joined* out);
  // Tells every other member this one gives up (the watchdog, cc_comm_abort).
  virtual Status abort(const std::string& reason) = 0;
  // The same without waiting for the answer.
  virtual Status abort_nowait(const std::string& reason) = 0;
  // Tells the others this member's init failed, waiting up to `timeout` for
  // the rendezvous to take it (protocol.hpp: InitFailed).
  virtual Status init_failed(uint32_t comm_number, const std::string& reason,
                             std::chrono::milliseconds timeout) = 0;

  // --- Being watched -----------------------------------------------------
  // Asks the rendezvous to announce this member as failed after `window` of
  // silence.
  virtual Status set_heartbeat_window(std::chrono::milliseconds window) = 0;
  virtual Status heartbeat(uint64_t last_completed) = 0;
  // Sends a heartbeat without waiting for its acknowledgement (the watchdog's
  // way: a cut cable must not stall it). The ack only refreshes last_heard().
  virtual Status heartbeat_nowait(uint64_t last_completed) = 0;
  // The same, carrying points of the member's calls for the rendezvous to
  // compare across ranks; a backend that compares none sends last_completed only.
  virtual Status heartbeat_with_calls_nowait(const Heartbeat& h) {
    return heartbeat_nowait(h.last_completed);
  }
  // A request of the rendezvous for points of this member's calls, if one
  // arrived (read by pump() or next_event()); a backend that asks none
  // returns none.
  virtual std::optional<CallsWanted> next_calls_wanted() { return std::nullopt; }
  // The member's calls up to its last, as its communicator ends: sends
  // `request` and waits for the verdict of every live member's (CallsEnd),
  // answering the rendezvous's requests for more points with `points_in`.
  // Success when the calls agree, CC_ERR_MISMATCH with the message of the
  // first difference, CC_ERR_TIMEOUT when no verdict came in
  // request.timeout_ms. A backend that compares none returns success.
  using PointsIn = std::function<std::vector<CallPoint>(uint64_t after, uint64_t through)>;
  virtual Status end_calls(const CallsEnd& request, const PointsIn& points_in) {
    (void)request;
    (void)points_in;
    return Status::success();
  }
  // Reads what arrived so far without blocking (for next_event(0)).
  virtual void pump() = 0;
  // A peer event pushed by the rendezvous, waiting up to `timeout` for one;
  // losing the rendezvous is one too (PeerEventKind::server_stopping).
  virtual std::optional<PeerEvent> next_event(std::chrono::milliseconds timeout) = 0;
  // When the rendezvous last answered (the connect time before that).
  virtual std::chrono::steady_clock::time_point last_heard() const = 0;

  // --- The reachability test at a communicator's start -------------------
  // Sends where this member listens for the test and waits for its plan
  // (request.timeout_ms, plus a grace for the answer). With request.enabled
  // false it only sends, and *out says skipped; a backend that runs no test
  // answers skipped.
  virtual Status preflight_ready(const PreflightReady& request, PreflightPlan* out) = 0;
  // Sends what this member's test found and waits for the verdict: success,
  // or the message naming who cannot reach whom.
  virtual Status preflight_report(const PreflightReport& request) = 0;

  // --- Questions ---------------------------------------------------------
  // Every member's last completed operation for one generation of the job.
  // rank -1: the other members furthest behind (see ProgressQuery).
  virtual Status progress(uint32_t comm_number, int32_t rank, Progress* out,
                          std::chrono::milliseconds timeout) = 0;
  // The same for one generation of a recovered communicator;
  // backends without recovery know generation 0 only.
  virtual Status progress_in(uint32_t comm_number, uint32_t generation, int32_t rank, Progress* out,
                             std::chrono::milliseconds timeout);
  // The members furthest behind (rank -1 above) and, where the backend
  // compares calls, where every member is as text (Progress::calls).
  virtual Status progress_with_calls(uint32_t comm_number, uint32_t generation, Progress* out,
                                     std::chrono::milliseconds timeout) {
    return progress_in(comm_number, generation, -1, out, timeout);
  }
  // The rendezvous's status report (see StatusQuery): its jobs, their
  // generations and members. A connection made with an empty job id may ask
  // nothing else. A backend without it says so (CC_ERR_INVALID_USAGE).
  virtual Status status(const StatusQuery& query, StatusReport* out,
                        std::chrono::milliseconds timeout);

  // --- Words -------------------------------------------------------------
  // Where it is: "host:port", "etcd://host:port,...".
  virtual const std::string& endpoint() const = 0;
  // What it is, for a sentence that names it: "the rendezvous server at
  // host:port", "the job's etcd rendezvous (etcd://...)".
  virtual std::string named() const = 0;
  // What to look at once it is lost, to go after "...: ": "look at cc-run
  // or cc-rendezvous", "check the cluster (...) and this host's network".
  virtual std::string lost_advice() const = 0;
};

}  // namespace cc::rv
