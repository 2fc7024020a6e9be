// What a client of cc's server keeps so that it can resume on the next
// server after a failover (frame_client.hpp, FrameClientOptions::locate):
// the communicator memberships its connection holds and what it last told
// the server of them (heartbeat window, last completed operation), and the
// requests that still await their answer, to be sent again with the same
// request id. No socket: FrameClient holds one under its state mutex; tests
// drive it alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::rv {

class ResumeBook {
 public:
  using Clock = std::chrono::steady_clock;

  // --- memberships ----------------------------------------------------------
  // A join or a recovery completed on this connection: `info` as the member
  // sent it (info.rank: its job rank), `joined` as the server answered.
  void joined(const MemberInfo& info, const Joined& joined);
  // A Leave: the connection holds no membership any more.
  void left() { members_.clear(); }
  void window(std::chrono::milliseconds w) { window_ms_ = static_cast<uint32_t>(w.count()); }
  void completed(uint64_t last_completed);
  bool member() const { return !members_.empty(); }
  // One Resume per membership, in the order they were made.
  const std::vector<Resume>& resumes() const { return members_; }
  // "rank 3 of communicator 0 (host h)", or "" without a membership.
  std::string who() const;

  // --- requests awaiting their answer -----------------------------------
  // A request that waits for its answer until `deadline` (the client's own,
  // a little past the server's), not yet on the wire.
  void await(uint32_t id, Message request, Clock::time_point deadline);
  // Its answer came, or nobody waits for it any more.
  void done(uint32_t id) { requests_.erase(id); }
  // The caller is about to write request `id`: false when it need not (it
  // was written on a new connection already, or is no longer awaited).
  bool take_for_sending(uint32_t id);
  // Every request still awaited, to write on a new connection, by request
  // id; each counts as written. A request the server waits on by design
  // (a get, a wait, a join, a recovery) asks for what is left of its time.
  std::vector<std::pair<uint32_t, Message>> to_send_again(Clock::time_point now);
  size_t awaited() const { return requests_.size(); }

  // The time a client adds to a request's own timeout for its answer to
  // arrive (frame_client.cpp's kAnswerGrace): what is left of a request's
  // server-side timeout is its deadline, less this, from now.
  static constexpr std::chrono::milliseconds kAnswerGrace{250};

 private:
  struct Request {
    Message message;
    Clock::time_point deadline;
    bool sent = false;
  };
  std::vector<Resume> members_;
  uint32_t window_ms_ = 0;
  uint64_t last_completed_ = 0;
  std::map<uint32_t, Request> requests_;
};

}  // namespace cc::rv
