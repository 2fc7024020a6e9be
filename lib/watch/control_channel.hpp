// A communicator's control channel, as the watchdog sees it: the rendezvous
// connection that stays open while the communicator lives. It asks the server
// to watch its heartbeats, sends one every interval, and turns what the server
// pushes (a member failed, aborted; the server went away) or a silent server
// into one failure with its message. Its heartbeats carry points of the
// communicator's calls: at once when CallLog::kReportEvery calls were made
// since the last (at most every tenth of an interval), and the points the
// server asks for (rv::CallsWanted) from the flight recorder's ring. No
// CUDA: CI drives it with processes as ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "lib/core/call_log.hpp"
#include "rendezvous/membership.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::watch {

struct ChannelOptions {
  int rank = -1;
  std::string host;
  uint32_t pid = 0;
  uint32_t comm_number = 0;                  // the communicator's join number
  uint32_t generation = 0;                   // its generation (cc_comm_generation)
  std::chrono::milliseconds interval{1000};  // heartbeat_ms
  int misses = 5;                            // heartbeat_misses
  bool server_in_rank0 = true;               // embedded mode: the server lives in rank 0
  // The calls whose points each heartbeat carries for the server to compare
  // across ranks (CC_CHECK_CALLS); null: none are compared.
  core::CallLog* calls = nullptr;
};

struct ChannelFailure {
  // mismatch: the rendezvous found that the ranks' calls differ (story names both).
  enum class Kind { peer_failed, peer_aborted, server_lost, mismatch } kind = Kind::peer_failed;
  int rank = -1;  // -1: the server (not embedded in a rank)
  std::string host;
  uint32_t pid = 0;
  std::string story;  // the whole sentence: who, what, what to do
};

// A communicator made by cc_comm_split of the channel's: it has no
// connection of its own, so its points go on its parent's, marked as its
// own line (rv::Heartbeat::split), and are compared among its members only.
struct SplitLine {
  uint32_t split = 0;  // the parent's n-th split (1, 2, ...), the same on every member
  int32_t color = 0;
  int32_t rank = -1;  // in the child
  core::CallLog* calls = nullptr;
  std::chrono::steady_clock::time_point next_report{};
  bool told = false;
};

class ControlChannel {
 public:
  ControlChannel(rv::Membership& client, ChannelOptions options);

  // Asks the server to watch this member (window = interval x misses), sends
  // the first heartbeat and learns every member's host and pid for messages.
  Status start();
  // One watchdog tick: a heartbeat when due, then what arrived. Returns the
  // first failure once; nothing after that, though heartbeats go on (a
  // failed communicator's rank stays a live member for its recovery) and
  // later failures are still counted in failed_ranks().
  std::optional<ChannelFailure> poll(std::chrono::steady_clock::time_point now,
                                     uint64_t last_completed);
  // A child's tick, on the watchdog's thread after the parent's poll: its
  // points when due, and the difference the rendezvous found among the
  // child's members, once (the parent's own calls are not involved).
  std::optional<ChannelFailure> poll_split(std::chrono::steady_clock::time_point now,
                                           SplitLine& line);
  // The ranks the rendezvous announced as failed so far (not aborted ones),
  // sorted; from any thread.
  std::vector<int> failed_ranks() const;
  // "rank 1 (host h, pid p) last completed op #41" for every member behind
  // `waiting_seq`, asked of the server; a message saying why when it cannot.
  std::string behind_words(uint64_t waiting_seq, std::chrono::milliseconds timeout);
  // Tells the other members this rank gives up (a timeout, an abort).
  void announce_abort(const std::string& story);

  std::chrono::milliseconds window() const { return options_.interval * options_.misses; }
  // "rank 3 (host h, pid p)" as the rendezvous knows it.
  std::string member_words(int rank, const std::string& host, uint32_t pid) const;

 private:
  ChannelFailure from_event(const rv::PeerEvent& e) const;
  // The points asked of this communicator, and those asked of a split child
  // kept for its poll_split.
  void answer_wants();
  void send_points(const rv::CallsWanted& w, core::CallLog& calls, int32_t split_rank);
  ChannelFailure server_lost(const std::string& reason) const;
  std::string self() const;  // who this member is, with its generation

  rv::Membership& client_;
  ChannelOptions options_;
  std::map<int32_t, rv::MemberProgress> members_;
  std::chrono::steady_clock::time_point next_heartbeat_{};
  std::chrono::steady_clock::time_point last_heartbeat_{};
  bool reported_ = false;
  uint64_t last_completed_ = 0;  // the parent's, sent with a child's points
  // Mismatches on split children, by (split, color), until their poll_split
  // takes them; at most kMaxSplitEvents.
  static constexpr size_t kMaxSplitEvents = 64;
  std::mutex split_mu_;
  std::map<std::pair<uint32_t, int32_t>, rv::PeerEvent> split_events_;
  std::map<std::pair<uint32_t, int32_t>, rv::CallsWanted> split_wants_;
  mutable std::mutex failed_mu_;
  std::set<int> failed_;
};

}  // namespace cc::watch
