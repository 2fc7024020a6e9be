#include "rendezvous/rules/call_check.hpp"

#include <algorithm>
#include <tuple>

#include "common/who.hpp"

namespace cc::rv::rules {
namespace {

std::string op(uint64_t seq) { return "op #" + std::to_string(seq); }

}  // namespace

std::optional<CallMismatch> CallCheck::report(const CallReport& r) {
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
  for (const CallPoint* p : points) {
    std::optional<CallMismatch> m =
        p->line == CallPoint::Line::collective ? collective(r, *p) : pair(r, *p);
    if (m) {
      diverged_ = true;
      collectives_.clear();
      pairs_.clear();
      return m;
    }
  }
  return std::nullopt;
}

uint64_t CallCheck::last_agreed_before(uint64_t seq) const {
  auto it = collectives_.lower_bound(seq);
  while (it != collectives_.begin()) {
    --it;
    if (it->second.matched) return it->first;
  }
  return 0;
}

std::optional<CallMismatch> CallCheck::collective(const CallReport& r, const CallPoint& p) {
  auto [it, inserted] = collectives_.try_emplace(p.seq, Seen{r.rank, r.host, r.pid, p, false});
  if (inserted) {
    if (collectives_.size() > kKeep) collectives_.erase(collectives_.begin());
    return std::nullopt;
  }
  Seen& first = it->second;
  if (first.rank == r.rank) return std::nullopt;  // a point reported again
  if (first.point.fingerprint == p.fingerprint) {
    first.matched = true;
    return std::nullopt;
  }
  const uint64_t agreed = last_agreed_before(p.seq);
  const std::string me = who(r.rank, r.host, r.pid);
  const std::string them = who(first.rank, first.host, first.pid);
  CallMismatch m{r.rank, first.rank, p.seq, {}};
  if (!same_call(first.point.call, p.call)) {
    // The higher rank first, whichever report came first, so that every run
    // of a program says the same ("rank 3 called ..., but rank 0 called ...").
    const bool me_first = r.rank > first.rank;
    const std::string& a = me_first ? me : them;
    const std::string& b = me_first ? them : me;
    const CallDesc& a_call = me_first ? p.call : first.point.call;
    const CallDesc& b_call = me_first ? first.point.call : p.call;
    m.words = a + " called " + op(p.seq) + " " + call_words(a_call) + ", but " + b + " called " +
              op(p.seq) + " " + call_words(b_call) + "; ";
    if (agreed + 1 == p.seq)
      m.words += agreed == 0 ? "the ranks diverged at their first collective"
                             : "the ranks diverged after " + op(agreed);
    else
      m.words += "their calls agree up to " +
                 (agreed == 0 ? "their first collective" : op(agreed)) +
                 " at least, and differ at " + op(p.seq) + " or before";
  } else {
    m.words = me + " and " + them + " both called " + op(p.seq) + " " + call_words(p.call) +
              ", but an earlier call differs: the ranks' calls " +
              (agreed == 0 ? std::string("differ before it")
                           : "agree up to " + op(agreed) + " and differ after it");
  }
  m.words +=
      ". Every rank must make the same collective calls in the same order; the flight "
      "recorder's files (CC_TRACE_DIR, cc-doctor trace) show each rank's calls";
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
