// The rule that compares the calls of a communicator's ranks: each rank
// reports points of its calls (common/call_desc.hpp: a number on a line and
// the line's running fingerprint there) as it goes, and two ranks that
// reported the same point with different fingerprints made different calls.
// Ranks run at different speeds, so the first report of each point is kept
// (up to kKeep of them) until another rank reports it too. Pure: no sockets,
// no etcd; cc's server feeds it from heartbeats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/call_desc.hpp"
#include "rendezvous/rules/call_positions.hpp"

namespace cc::rv::rules {

struct CallReport {
  int32_t rank = -1;
  std::string host;
  uint32_t pid = 0;
  std::vector<CallPoint> points;
};

struct CallMismatch {
  int32_t rank = -1;        // the rank whose report showed the difference
  int32_t other_rank = -1;  // the rank it differs from
  uint64_t seq = 0;         // the point where they differ, on its line
  std::string words;        // the whole sentence: both calls, both ranks, where they diverged
};

class CallCheck {
 public:
  static constexpr size_t kKeep = 4096;  // points kept per line kind

  // Compares the report with what the other ranks reported. The first
  // difference is returned once; the communicator's calls are not compared
  // after it.
  std::optional<CallMismatch> report(const CallReport& r);
  bool diverged() const { return diverged_; }
  // Each reporting rank's last collective, by rank (kept after a difference too).
  const std::map<int32_t, RankCall>& last_calls() const { return last_calls_; }
  size_t points_kept() const { return collectives_.size() + pairs_.size(); }

 private:
  struct Seen {
    int32_t rank = -1;
    std::string host;
    uint32_t pid = 0;
    CallPoint point;
    bool matched = false;  // another rank reported the same fingerprint here
  };
  struct Pair {
    std::optional<Seen> send, recv;
  };
  std::optional<CallMismatch> collective(const CallReport& r, const CallPoint& p);
  std::optional<CallMismatch> pair(const CallReport& r, const CallPoint& p);
  uint64_t last_agreed_before(uint64_t seq) const;

  std::map<uint64_t, Seen> collectives_;
  std::map<std::tuple<int32_t, int32_t, uint64_t>, Pair> pairs_;  // (from, to, k)
  std::map<int32_t, RankCall> last_calls_;
  bool diverged_ = false;
};

}  // namespace cc::rv::rules
