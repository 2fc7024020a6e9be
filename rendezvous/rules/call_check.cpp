#include "rendezvous/rules/call_check.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

#include "common/who.hpp"

namespace cc::rv::rules {
namespace {

std::string op(uint64_t seq) { return "op #" + std::to_string(seq); }

const char* const kAdvice =
    ". Every rank must make the same collective calls in the same order; the flight "
    "recorder's files (CC_TRACE_DIR, cc-doctor trace) show each rank's calls";

std::string parted_after(uint64_t agreed) {
  return agreed == 0 ? "the ranks diverged at their first collective"
                     : "the ranks diverged after " + op(agreed);
}

// The rank that ended first (the fewest calls ended with; of a tie, the lowest
// rank) and its last call's number; rank -1 when none has ended.
std::pair<int32_t, uint64_t> first_to_end(const std::map<int32_t, uint64_t>& ended) {
  int32_t first = -1;
  uint64_t lo = 0;
  for (const auto& [rank, last] : ended) {
    if (first >= 0 && last >= lo) continue;
    first = rank;
    lo = last;
  }
  return {first, lo};
}

}  // namespace

std::optional<CallMismatch> CallCheck::report(const CallReport& r) { return take(r); }

std::optional<CallMismatch> CallCheck::end(const CallReport& r, uint64_t last,
                                           uint64_t last_replay) {
  ended_[r.rank] = last;
  ended_replays_[r.rank] = last_replay;
  enders_[r.rank] = Seen{r.rank, r.host, r.pid, {}, false};
  return take(r);
}

std::optional<CallMismatch> CallCheck::finish() {
  finishing_ = true;
  return decide();
}

std::optional<CallMismatch> CallCheck::gone(int32_t rank) {
  if (want_) {
    std::erase(want_->ranks, rank);
    if (want_->ranks.empty()) want_.reset();
  }
  return decide();
}

std::optional<CallsWant> CallCheck::take_want() {
  if (!want_ || want_taken_) return std::nullopt;
  want_taken_ = true;
  return want_;
}

std::optional<CallMismatch> CallCheck::take(const CallReport& r) {
  for (const CallPoint& p : r.points) {
    if (p.line != CallPoint::Line::collective) continue;
    RankCall& last = last_calls_[r.rank];
    if (p.seq >= last.seq) last = {r.rank, p.seq, p.call};
  }
  if (diverged_) return std::nullopt;
  std::vector<const CallPoint*> points;
  points.reserve(r.points.size());
  for (const CallPoint& p : r.points) points.push_back(&p);
  // Lowest first, so the first difference found is the earliest one reported.
  std::stable_sort(points.begin(), points.end(), [](const CallPoint* a, const CallPoint* b) {
    return std::tie(a->line, a->peer, a->seq) < std::tie(b->line, b->peer, b->seq);
  });
  bool collectives_done = false;
  for (const CallPoint* p : points) {
    if (p->line == CallPoint::Line::collective) {
      collective(r, *p);
      continue;
    }
    if (p->line == CallPoint::Line::replay) {
      replay(r, *p);
      continue;
    }
    // A difference among the collectives is told before one of the pairs.
    if (!collectives_done) {
      collectives_done = true;
      if (std::optional<CallMismatch> m = decide(); m || diverged_) return m;
    }
    if (std::optional<CallMismatch> m = pair(r, *p)) return conclude(std::move(*m));
  }
  if (r.answers != 0 && want_ && want_->id == r.answers) {
    std::erase(want_->ranks, r.rank);
    if (want_->ranks.empty()) want_.reset();
  }
  return decide();
}

uint64_t CallCheck::last_agreed_before(uint64_t seq) const {
  auto it = collectives_.lower_bound(seq);
  while (it != collectives_.begin()) {
    --it;
    if (it->second.matched) return it->first;
  }
  return 0;
}

void CallCheck::collective(const CallReport& r, const CallPoint& p) {
  auto [it, inserted] = collectives_.try_emplace(p.seq, Seen{r.rank, r.host, r.pid, p, false});
  if (inserted) {
    if (collectives_.size() > kKeep) collectives_.erase(collectives_.begin());
    return;
  }
  Seen& first = it->second;
  if (first.rank == r.rank) return;  // a point reported again
  if (first.point.fingerprint == p.fingerprint) {
    first.matched = true;
    return;
  }
  if (!difference_ || p.seq < difference_->seq)
    difference_ = Difference{p.seq, first, Seen{r.rank, r.host, r.pid, p, false}};
}

void CallCheck::replay(const CallReport& r, const CallPoint& p) {
  CallPoint& last = last_replays_[r.rank];
  if (p.seq >= last.seq) last = p;
  auto [it, inserted] = replays_.try_emplace(p.seq, Seen{r.rank, r.host, r.pid, p, false});
  if (inserted) {
    if (replays_.size() > kKeep) replays_.erase(replays_.begin());
    return;
  }
  Seen& first = it->second;
  if (first.rank == r.rank) return;
  if (first.point.fingerprint == p.fingerprint) {
    first.matched = true;
    return;
  }
  if (!replay_difference_ || p.seq < replay_difference_->seq)
    replay_difference_ = Difference{p.seq, first, Seen{r.rank, r.host, r.pid, p, false}};
}

bool CallCheck::ask(uint64_t after, uint64_t through, std::vector<int32_t> ranks) {
  if (!asks_ || std::make_pair(after, through) == last_asked_ || wants_ >= kMaxWants)
    return false;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  want_ = CallsWant{next_want_++, after, through, std::move(ranks)};
  want_taken_ = false;
  ++wants_;
  last_asked_ = {after, through};
  return true;
}

std::optional<CallMismatch> CallCheck::conclude(CallMismatch m) {
  diverged_ = true;
  verdict_ = m;
  want_.reset();
  difference_.reset();
  replay_difference_.reset();
  collectives_.clear();
  replays_.clear();
  pairs_.clear();
  return m;
}

std::optional<CallMismatch> CallCheck::decide() {
  if (diverged_) return std::nullopt;
  if (difference_) {
    const uint64_t agreed = last_agreed_before(difference_->seq);
    if (agreed + 1 == difference_->seq) return conclude(differ_words(*difference_, agreed));
    if (want_) return std::nullopt;  // the points in between are on their way
    // The point where the ranks last agreed is asked too: another pair of
    // ranks may have been the ones that agreed there.
    if (ask(agreed > 0 ? agreed - 1 : 0, difference_->seq - 1,
            {difference_->first.rank, difference_->other.rank}))
      return std::nullopt;
    return conclude(differ_words(*difference_, agreed));
  }
  if (replay_difference_) return conclude(replay_words(*replay_difference_));
  if (ended_.empty()) return std::nullopt;
  if (std::optional<CallMismatch> m = ended_apart(); m || want_ || diverged_) return m;
  if (std::optional<CallMismatch> m = replays_ended_apart()) return conclude(std::move(*m));
  return std::nullopt;
}

namespace {

const char* const kReplayAdvice =
    ". Every rank must replay the same CUDA graphs, as many times and in the same order (each "
    "graph's calls were compared as it was captured); a replay counts when the GPU reaches it, "
    "so synchronize the stream a graph was launched on before cc_comm_destroy";

std::string replay_number(uint64_t n) { return "graph replay #" + std::to_string(n); }

}  // namespace

// The lowest replay where two ranks' running fingerprints differ.
CallMismatch CallCheck::replay_words(const Difference& d) const {
  uint64_t agreed = 0;
  for (auto it = replays_.lower_bound(d.seq); it != replays_.begin();) {
    --it;
    if (it->second.matched) {
      agreed = it->first;
      break;
    }
  }
  // The higher rank first, whichever report came first.
  const bool other_first = d.other.rank > d.first.rank;
  const Seen& a = other_first ? d.other : d.first;
  const Seen& b = other_first ? d.first : d.other;
  const std::string a_who = who(a.rank, a.host, a.pid);
  const std::string b_who = who(b.rank, b.host, b.pid);
  const std::string a_graph = graph_words(a.point);
  const std::string b_graph = graph_words(b.point);
  CallMismatch m{d.other.rank, d.first.rank, d.seq, {}};
  const std::string at = replay_number(d.seq);
  const bool adjacent = agreed + 1 == d.seq;
  if (a_graph != b_graph)
    m.words = at + ": " + a_who + " replayed " + a_graph + ", but " + b_who + " replayed " +
              b_graph + "; " +
              (adjacent ? (agreed == 0 ? std::string("their first replays differ")
                                       : "their replays agree up to " + replay_number(agreed))
                        : "their replays agree up to " +
                              (agreed == 0 ? std::string("their first") : replay_number(agreed)) +
                              " at least, and differ at " + at + " or before");
  else if (adjacent)
    m.words = at + ": " + a_who + " and " + b_who + " both replayed " + a_graph +
              ", but not the same graph (another call after the first)";
  else
    m.words = at + ": " + a_who + " and " + b_who + " both replayed " + a_graph +
              ", but an earlier replay differs: their replays " +
              (agreed == 0 ? std::string("differ before it")
                           : "agree up to " + replay_number(agreed) + " and differ after it");
  m.words += kReplayAdvice;
  return m;
}

// A rank that ended after replay #N while another made replay #N+1.
std::optional<CallMismatch> CallCheck::replays_ended_apart() const {
  if (ended_replays_.empty()) return std::nullopt;
  const auto [short_rank, lo] = first_to_end(ended_replays_);
  int32_t long_rank = -1;
  uint64_t furthest = 0;
  for (const auto& [rank, e] : ended_replays_)
    if (e > lo && long_rank < 0) long_rank = rank, furthest = e;
  for (const auto& [rank, p] : last_replays_)
    if (rank != short_rank && p.seq > lo && long_rank < 0) long_rank = rank, furthest = p.seq;
  if (long_rank < 0) return std::nullopt;
  const auto s = enders_.find(short_rank);
  const std::string shorter = s == enders_.end()
                                  ? "rank " + std::to_string(short_rank)
                                  : who(s->second.rank, s->second.host, s->second.pid);
  const std::string ended_words =
      lo == 0 ? "it ended (cc_comm_destroy) before any graph replay"
              : "it ended (cc_comm_destroy) after " + replay_number(lo);
  CallMismatch m{long_rank, short_rank, lo + 1, {}};
  const auto next = replays_.find(lo + 1);
  if (next != replays_.end() && next->second.rank != short_rank) {
    const Seen& l = next->second;
    m.rank = l.rank;
    m.words = replay_number(lo + 1) + ": " + who(l.rank, l.host, l.pid) + " replayed " +
              graph_words(l.point) + ", but " + shorter + " made no " + replay_number(lo + 1) +
              ": " + ended_words;
  } else {
    m.words = "rank " + std::to_string(long_rank) + " made " + std::to_string(furthest) +
              " graph replays, but " + shorter + " made " + std::to_string(lo) + ": " +
              ended_words;
  }
  m.words += kReplayAdvice;
  return m;
}

// A rank that ended after op #N while another made op #N+1: one of them
// skipped a call or made an extra one.
std::optional<CallMismatch> CallCheck::ended_apart() {
  const auto [short_rank, lo] = first_to_end(ended_);
  int32_t long_rank = -1;
  uint64_t furthest = 0;
  for (const auto& [rank, call] : last_calls_) {
    const auto e = ended_.find(rank);
    const uint64_t at = std::max(call.seq, e == ended_.end() ? uint64_t{0} : e->second);
    if (rank == short_rank || at <= lo || long_rank >= 0) continue;
    long_rank = rank;
    furthest = at;
  }
  if (long_rank < 0) return std::nullopt;
  const auto next = collectives_.find(lo + 1);
  const auto at_end = collectives_.find(lo);
  const bool have_next = next != collectives_.end() && next->second.rank != short_rank;
  const bool agree = lo == 0 || (at_end != collectives_.end() && at_end->second.matched);
  if (want_) return std::nullopt;
  if (!(have_next && agree) && ask(lo > 0 ? lo - 1 : 0, lo + 1, {long_rank})) return std::nullopt;
  const Seen& s = enders_[short_rank];
  const std::string shorter = who(s.rank, s.host, s.pid);
  const std::string ended_words =
      lo == 0 ? "it ended (cc_comm_destroy) before any collective"
              : "it ended (cc_comm_destroy) after " + op(lo);
  CallMismatch m{long_rank, short_rank, lo + 1, {}};
  if (have_next) {
    const Seen& l = next->second;
    m.rank = l.rank;
    m.words = who(l.rank, l.host, l.pid) + " called " + op(lo + 1) + " " +
              call_words(l.point.call) + ", but " + shorter + " made no " + op(lo + 1) + ": " +
              ended_words + "; " +
              (agree ? parted_after(lo)
                     : "their calls differ at " + op(lo + 1) + " or before");
  } else {
    m.words = "rank " + std::to_string(long_rank) + " made " + std::to_string(furthest) +
              " collectives, but " + shorter + " made " + std::to_string(lo) + ": " +
              ended_words + "; their calls differ at " + op(lo + 1) + " or before";
  }
  m.words += kAdvice;
  return conclude(std::move(m));
}

CallMismatch CallCheck::differ_words(const Difference& d, uint64_t agreed) const {
  const Seen& first = d.first;
  const Seen& mine = d.other;
  const std::string me = who(mine.rank, mine.host, mine.pid);
  const std::string them = who(first.rank, first.host, first.pid);
  CallMismatch m{mine.rank, first.rank, d.seq, {}};
  if (!same_call(first.point.call, mine.point.call)) {
    // The higher rank first, whichever report came first, so that every run
    // of a program says the same ("rank 3 called ..., but rank 0 called ...").
    const bool me_first = mine.rank > first.rank;
    const std::string& a = me_first ? me : them;
    const std::string& b = me_first ? them : me;
    const CallDesc& a_call = me_first ? mine.point.call : first.point.call;
    const CallDesc& b_call = me_first ? first.point.call : mine.point.call;
    m.words = a + " called " + op(d.seq) + " " + call_words(a_call) + ", but " + b + " called " +
              op(d.seq) + " " + call_words(b_call) + "; ";
    if (agreed + 1 == d.seq)
      m.words += parted_after(agreed);
    else
      m.words += "their calls agree up to " +
                 (agreed == 0 ? "their first collective" : op(agreed)) +
                 " at least, and differ at " + op(d.seq) + " or before";
  } else {
    m.words = me + " and " + them + " both called " + op(d.seq) + " " + call_words(mine.point.call) +
              ", but an earlier call differs: the ranks' calls " +
              (agreed == 0 ? std::string("differ before it")
                           : "agree up to " + op(agreed) + " and differ after it");
  }
  m.words += kAdvice;
  return m;
}

std::optional<CallMismatch> CallCheck::pair(const CallReport& r, const CallPoint& p) {
  const bool is_send = p.line == CallPoint::Line::send;
  const int32_t from = is_send ? r.rank : p.peer;
  const int32_t to = is_send ? p.peer : r.rank;
  auto key = std::make_tuple(from, to, p.seq);
  if (pairs_.size() >= kKeep && pairs_.find(key) == pairs_.end()) pairs_.erase(pairs_.begin());
  Pair& pr = pairs_[key];
  std::optional<Seen>& mine = is_send ? pr.send : pr.recv;
  const std::optional<Seen>& theirs = is_send ? pr.recv : pr.send;
  if (!mine) mine = Seen{r.rank, r.host, r.pid, p, false};
  if (!theirs) return std::nullopt;
  const Seen& s = *pr.send;
  const Seen& v = *pr.recv;
  if (s.point.fingerprint == v.point.fingerprint) {
    pairs_.erase(key);
    return std::nullopt;
  }
  const std::string sender = who(s.rank, s.host, s.pid);
  const std::string receiver = who(v.rank, v.host, v.pid);
  const std::string k = std::to_string(p.seq);
  CallMismatch m{r.rank, is_send ? to : from, p.seq, {}};
  if (!pair_matches(s.point.call, v.point.call))
    m.words = sender + "'s send #" + k + " to rank " + std::to_string(to) + " is " +
              call_words(s.point.call) + ", but " + receiver + "'s recv #" + k + " from rank " +
              std::to_string(from) + " is " + call_words(v.point.call);
  else
    m.words = sender + "'s send #" + k + " to rank " + std::to_string(to) + " and " + receiver +
              "'s recv #" + k + " from rank " + std::to_string(from) + " agree (" +
              call_words(s.point.call) + "), but an earlier send and recv between them differ";
  m.words +=
      ". The k-th cc_send from a rank to a peer must match the peer's k-th cc_recv from it, "
      "in count and datatype; the flight recorder's files (CC_TRACE_DIR, cc-doctor trace) show "
      "each rank's calls";
  return m;
}

}  // namespace cc::rv::rules
