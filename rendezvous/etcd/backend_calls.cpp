// The ranks' calls compared on etcd, by the rule cc's server uses
// (rendezvous/rules/call_check). Every rank puts the points its heartbeats
// carry on gen/<g>/calls/<rank>, on its lease: one put per heartbeat that
// has new points, at most one in flight (points that come meanwhile go in
// the next put). The generation's rank 0 alone watches that prefix from the
// join's checked revision, so it reads every report in etcd's order, feeds
// them to one rules::CallCheck and, at the first difference, puts the words
// once on gen/<g>/mismatch (a transaction on its absence). Every rank's
// generation watch covers that one key and turns it into the same mismatch
// peer event, so the words are those of cc's server, on every rank.
// A communicator made by cc_comm_split reports through its parent's
// connection as a line of its own (Heartbeat::split: calls/s<n>.<color>/,
// mismatch/s<n>.<color>), compared on its own by the same rank 0.
//
// Cost per period of W ranks: W small puts, W watch events to one follower,
// O(points) work in rank 0 for each; no rank reads another's key, and only
// rank 0 watches a prefix that every rank writes to.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "common/log.hpp"
#include "rendezvous/etcd/backend_impl.hpp"
#include "rendezvous/etcd/call_records.hpp"
#include "rendezvous/rules/call_check.hpp"

namespace cc::rv::etcd {

namespace {

constexpr milliseconds kCheckWatchSlice{30000};  // the prefix's watch is opened again this often
constexpr milliseconds kRetryPause{500};         // after a failed put or watch

constexpr size_t kMaxLines = 65;  // the communicator and 64 split children, as cc's server

bool same_gen(Gen a, Gen b) { return a.g == b.g && a.generation == b.generation; }

using Line = std::pair<uint32_t, int32_t>;  // (split, color); (0, 0): the communicator

}  // namespace

struct Backend::Impl::CallChecking {
  explicit CallChecking(Impl& i) : impl(i) {}
  ~CallChecking() { stop(); }

  // Serves generation `g` as rank `self.rank` (and compares, when it is 0).
  void start(Gen g, rules::CallReport self, int64_t from_revision);
  void stop();
  void add(const Heartbeat& h);
  bool serves(Gen g) {
    std::lock_guard<std::mutex> lock(mu);
    return running && same_gen(gen, g);
  }

 private:
  void write_reports();
  void compare(int64_t from_revision);
  bool put_mismatch(Gen g, const PeerEvent& verdict);
  bool put_all(Gen g, std::vector<PeerEvent>* verdicts);
  bool pause() {  // false when stopping
    std::unique_lock<std::mutex> lock(mu);
    return !cv.wait_for(lock, kRetryPause, [&] { return stopping; });
  }

  Impl& impl;
  std::mutex mu;
  std::condition_variable cv;
  bool running = false;
  bool stopping = false;
  Gen gen{0};
  rules::CallReport self;                     // who reports (points unused)
  std::map<Line, rules::CallReport> pending;  // not yet written, by line
  std::thread writer, comparer;               // comparer: rank 0 only
  std::unique_ptr<WatchCancel> cancel;
};

void Backend::Impl::CallCheckingEnd::operator()(CallChecking* c) const { delete c; }

void Backend::Impl::CallChecking::start(Gen g, rules::CallReport who, int64_t from_revision) {
  stop();
  std::lock_guard<std::mutex> lock(mu);
  running = true;
  stopping = false;
  gen = g;
  self = std::move(who);
  writer = std::thread([this] { write_reports(); });
  if (self.rank == 0) {
    cancel = std::make_unique<WatchCancel>();
    comparer = std::thread([this, from_revision] { compare(from_revision); });
  }
}

void Backend::Impl::CallChecking::stop() {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!running) return;
    stopping = true;
    if (cancel) cancel->cancel();
  }
  cv.notify_all();
  if (writer.joinable()) writer.join();
  if (comparer.joinable()) comparer.join();
  std::lock_guard<std::mutex> lock(mu);
  running = false;
  pending.clear();
  cancel.reset();
}

void Backend::Impl::CallChecking::add(const Heartbeat& h) {
  {
    std::lock_guard<std::mutex> lock(mu);
    const Line line{h.split, h.split == 0 ? 0 : h.split_color};
    auto it = pending.find(line);
    if (it == pending.end()) {
      if (pending.size() >= kMaxLines) return;
      rules::CallReport r = self;
      if (h.split != 0) r.rank = h.split_rank;  // its rank in the child
      it = pending.emplace(line, std::move(r)).first;
    }
    std::vector<CallPoint>& p = it->second.points;
    p.insert(p.end(), h.calls.begin(), h.calls.end());
    // A put slower than the heartbeats: the newest points are kept.
    if (p.size() > kMaxHeartbeatCalls)
      p.erase(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(p.size() - kMaxHeartbeatCalls));
  }
  cv.notify_all();
}

// One round of puts in flight: the reports that came meanwhile go together next.
void Backend::Impl::CallChecking::write_reports() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    cv.wait(lock, [&] { return stopping || !pending.empty(); });
    if (stopping) break;
    std::map<Line, rules::CallReport> reports;
    reports.swap(pending);
    const Gen g = gen;
    lock.unlock();
    int64_t lease = 0;
    milliseconds within{0};
    {
      std::lock_guard<std::mutex> impl_lock(impl.mu);
      lease = impl.lease;
      // No longer than the heartbeat window: a leave waits for this put.
      within = std::min(impl.opt.request_timeout, impl.window);
    }
    bool failed = false;
    for (const auto& [line, r] : reports) {
      Status s = lease == 0 ? make_status(CC_ERR_RENDEZVOUS, "no membership lease")
                            : impl.etcd->put(impl.keys.calls(g, line.first, line.second, r.rank),
                                             encode(r), lease, impl.after(within));
      if (!s.ok()) {
        log().debug("etcd: job {}: writing rank {}'s calls: {}", quote(impl.opt.job_id), r.rank,
                    s.message);
        failed = true;
      }
    }
    if (failed && !pause()) return;
    lock.lock();
  }
}

// Rank 0: every report of the generation, in etcd's order, through the
// rule of its line; at a line's first difference, its verdict until etcd has it.
void Backend::Impl::CallChecking::compare(int64_t from_revision) {
  Gen g{0};
  {
    std::lock_guard<std::mutex> lock(mu);
    g = gen;
  }
  std::map<Line, rules::CallCheck> checks;
  int64_t next = from_revision;
  while (!cancel->cancelled()) {
    std::vector<PeerEvent> verdicts;
    WatchSpec spec;
    spec.key = impl.keys.calls_prefix(g);
    spec.range_end = prefix_end(spec.key);
    spec.start_revision = next;
    spec.no_delete = true;
    Status s = impl.etcd->watch(
        {spec}, Clock::now() + kCheckWatchSlice, cancel.get(),
        [&](const std::vector<WatchEvent>& evs, int64_t) {
          for (const WatchEvent& e : evs) {
            next = std::max(next, e.kv.mod_revision + 1);
            const auto line = impl.keys.calls_line(g, e.kv.key);
            rules::CallReport r;
            if (!line || !decode(e.kv.value, &r)) continue;
            auto it = checks.find(*line);
            if (it == checks.end()) {
              if (checks.size() >= kMaxLines) checks.erase(std::next(checks.begin()));
              it = checks.try_emplace(*line).first;
            }
            if (auto m = it->second.report(r))
              // The reporting rank, named as cc's server names it.
              verdicts.push_back(PeerEvent{PeerEventKind::mismatch, m->rank, r.host, r.pid,
                                           m->words, line->first, line->second});
          }
          return verdicts.empty();
        });
    if (!verdicts.empty()) {
      if (!put_all(g, &verdicts)) return;
      continue;
    }
    if (s.code == CC_ERR_ABORTED) return;
    if (s.ok() || s.code == CC_ERR_TIMEOUT) continue;
    log().debug("etcd: job {}: watching the calls of communicator {}, generation {}: {}",
                quote(impl.opt.job_id), g.g, g.generation, s.message);
    if (!pause()) return;
  }
}

// Each verdict put until etcd has it; false when stopped first.
bool Backend::Impl::CallChecking::put_all(Gen g, std::vector<PeerEvent>* verdicts) {
  for (const PeerEvent& v : *verdicts)
    while (!put_mismatch(g, v))
      if (!pause()) return false;
  verdicts->clear();
  return true;
}

// The words once, for every rank: a transaction on the key's absence, so a
// put retried after a lost answer changes nothing. False when etcd could
// not be told.
bool Backend::Impl::CallChecking::put_mismatch(Gen g, const PeerEvent& verdict) {
  const std::string key = impl.keys.mismatch(g, verdict.split, verdict.split_color);
  Txn t;
  t.compare = {Compare::absent(key)};
  t.success = {Op::put(key, encode_mismatch(verdict))};
  TxnResult result;
  if (Status s = impl.etcd->txn(t, impl.after(impl.opt.request_timeout), &result); !s.ok()) {
    log().warn("etcd: job {}: communicator {} (generation {}, split {}): {}; telling the ranks: {}",
               quote(impl.opt.job_id), g.g, g.generation, verdict.split, verdict.reason, s.message);
    return false;
  }
  log().warn("etcd: job {}: communicator {} (generation {}, split {}): {}; told every member",
             quote(impl.opt.job_id), g.g, g.generation, verdict.split, verdict.reason);
  return true;
}

// ---- Impl ----------------------------------------------------------------------

Status Backend::Impl::report_calls(const Heartbeat& h) {
  Gen g{0};
  rules::CallReport who;
  int64_t from = 0;
  CallChecking* checking = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    // Points of another generation, or before the join's result: not ours to compare.
    if (!member || !join_result || !join_result->ok || h.comm_number != comm_number ||
        h.generation != generation)
      return Status::success();
    // Nothing to write or compare before this rank's first call: its
    // threads start with it (rank 0's comparison still reads every report
    // from the join on), and a member that makes no calls starts none.
    if (h.calls.empty() && !call_checking) return Status::success();
    g = current();
    who = {position, me.host, me.pid, {}};
    from = join_result->checked_revision + 1;
    if (!call_checking) call_checking.reset(new CallChecking(*this));
    checking = call_checking.get();
  }
  // The watchdog's thread alone reports, so nothing else starts it meanwhile.
  if (!checking->serves(g)) checking->start(g, std::move(who), from);
  if (!h.calls.empty()) checking->add(h);
  return Status::success();
}

void Backend::Impl::stop_call_check() {
  CallChecking* checking = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    checking = call_checking.get();
  }
  if (checking != nullptr) checking->stop();
}

void Backend::Impl::on_mismatch(const WatchEvent& e, std::set<std::pair<uint32_t, int32_t>>* told) {
  PeerEvent ev;
  if (!decode_mismatch(e.kv.value, &ev) || told->size() >= kMaxLines) return;
  if (!told->insert({ev.split, ev.split_color}).second) return;
  log().debug("etcd: job {}: the calls differ: {}", quote(opt.job_id), ev.reason);
  push_event(std::move(ev));
}

Status Backend::heartbeat_with_calls_nowait(const Heartbeat& h) {
  impl_->last_completed.store(h.last_completed);
  return impl_->report_calls(h);
}

}  // namespace cc::rv::etcd
