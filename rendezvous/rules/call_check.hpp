// The rule that compares the calls of a communicator's ranks: each rank
// reports points of its calls (common/call_desc.hpp: a number on a line and
// the line's running fingerprint there) as it goes, and two ranks that
// reported the same point with different fingerprints made different calls.
// Ranks run at different speeds, so the first report of each point is kept
// (up to kKeep of them) until another rank reports it too. Reports are
// sparse, so a difference may first show at a point past where the ranks
// parted: the rule then asks the two ranks for their points in between
// (CallsWant, answered from their flight recorders) until it names the first
// op that differs. At a communicator's end each rank reports its last call
// (end), and once every live rank has (finish) ranks that ended at another
// op are a difference too: a skipped or an extra call. The replays of CUDA
// graphs form a line of their own, compared the same way (the same replay
// number must have the same running fingerprint), and ranks that ended
// after another number of replays differ too; a difference among the
// collectives is told first. Pure: no sockets, no etcd; cc's server feeds
// it from heartbeats and from each rank's end.
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
  uint64_t answers = 0;  // the CallsWant these points answer (0: none)
};

// The collectives the rule wants from some ranks: those numbered after
// `after`, up to `through`, lowest first.
struct CallsWant {
  uint64_t id = 0;
  uint64_t after = 0;
  uint64_t through = 0;
  std::vector<int32_t> ranks;  // asked, and not yet answered
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
  static constexpr int kMaxWants = 8;    // rounds of asking before a message that gives a range

  // `asks`: whether its driver can ask ranks for their points (CallsWant);
  // without, a difference past where the ranks parted is told as a range.
  explicit CallCheck(bool asks = false) : asks_(asks) {}

  // Compares the report with what the other ranks reported. The first
  // difference is returned once; the communicator's calls are not compared
  // after it.
  std::optional<CallMismatch> report(const CallReport& r);
  // A rank's last report before its communicator ends: its points, the
  // number of its last collective and of its last graph replay (0: none).
  std::optional<CallMismatch> end(const CallReport& r, uint64_t last, uint64_t last_replay = 0);
  // Every rank still alive has ended: where they ended is compared too.
  std::optional<CallMismatch> finish();
  // A rank gone (a death, a leave): it is asked nothing more.
  std::optional<CallMismatch> gone(int32_t rank);
  // A CallsWant not yet taken, once; pending_want() stays until answered.
  std::optional<CallsWant> take_want();
  const std::optional<CallsWant>& pending_want() const { return want_; }
  bool finishing() const { return finishing_; }
  bool ended(int32_t rank) const { return ended_.count(rank) != 0; }
  // The first difference, once found.
  const std::optional<CallMismatch>& verdict() const { return verdict_; }
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
  // Two ranks' points at one number that differ.
  struct Difference {
    uint64_t seq = 0;
    Seen first, other;
  };
  std::optional<CallMismatch> take(const CallReport& r);
  void collective(const CallReport& r, const CallPoint& p);
  void replay(const CallReport& r, const CallPoint& p);
  std::optional<CallMismatch> pair(const CallReport& r, const CallPoint& p);
  uint64_t last_agreed_before(uint64_t seq) const;
  // What the points known so far decide: a difference, a want, or nothing yet.
  std::optional<CallMismatch> decide();
  std::optional<CallMismatch> ended_apart();
  std::optional<CallMismatch> replays_ended_apart() const;
  CallMismatch replay_words(const Difference& d) const;
  bool ask(uint64_t after, uint64_t through, std::vector<int32_t> ranks);
  std::optional<CallMismatch> conclude(CallMismatch m);
  CallMismatch differ_words(const Difference& d, uint64_t agreed) const;

  std::map<uint64_t, Seen> collectives_;
  std::map<std::tuple<int32_t, int32_t, uint64_t>, Pair> pairs_;  // (from, to, k)
  std::map<int32_t, RankCall> last_calls_;
  std::optional<Difference> difference_;  // the lowest known
  std::map<uint64_t, Seen> replays_;              // the replay line's points, as collectives_
  std::optional<Difference> replay_difference_;  // the lowest known
  std::map<int32_t, CallPoint> last_replays_;     // by rank: its last replay reported
  std::map<int32_t, uint64_t> ended_replays_;     // by rank: its last replay as it ended
  bool asks_ = false;
  std::optional<CallsWant> want_;
  bool want_taken_ = false;
  uint64_t next_want_ = 1;
  int wants_ = 0;
  std::pair<uint64_t, uint64_t> last_asked_{0, 0};
  std::map<int32_t, uint64_t> ended_;  // by rank: its last collective
  std::map<int32_t, Seen> enders_;     // by rank: who it is
  bool finishing_ = false;
  std::optional<CallMismatch> verdict_;
  bool diverged_ = false;
};

}  // namespace cc::rv::rules
