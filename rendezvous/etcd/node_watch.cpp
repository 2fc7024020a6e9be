// The etcd node agent's watch (node_agent.hpp): the ranks' watches merged
// by key range on one stream, each rank told from its own revision.
#include <algorithm>

#include "common/log.hpp"
#include "rendezvous/etcd/node_agent_impl.hpp"

namespace cc::rv::etcd::node {

namespace {

constexpr size_t kRecentEvents = 64;  // kept per watched range, for ranks that come late
constexpr milliseconds kWatchSlice{30000};
// A range to be watched from further back than this many revisions is read
// first (catch_up): etcd keeps a watcher that starts behind "unsynced" and
// catches it up from its history, a few hundred watchers a pass, each pass
// reading every revision since the oldest start (a large job's claims put
// thousands of revisions between a node's claim and its watch).
constexpr int64_t kCatchUpGap = 256;

// Whether a read of a watched range shows that nothing the watcher reacts
// to happened there since revision `from`: no key of the range put since
// (it watches puts), or the one key it watches for its delete still there,
// created before `from` (a delete and a new put would have made it anew).
// A delete leaves no trace in a read of a range of several keys, nor when
// the key is gone: not quiet. (A key put and deleted again since `from`
// leaves none either: the ranges watched for puts alone, a generation's
// news, lose their keys only with the whole generation.)
bool quiet_since(const WatchSpec& spec, const RangeResult& read, int64_t from) {
  if (spec.no_put)
    return spec.range_end.empty() && read.kvs.size() == 1 &&
           read.kvs.front().create_revision < from;
  for (const KeyValue& kv : read.kvs)
    if (kv.mod_revision >= from) return false;
  return spec.no_delete || (spec.range_end.empty() && read.kvs.size() == 1);
}

std::string watcher_id(const WatchSpec& s) {
  return s.key + '\0' + s.range_end + '\0' + (s.no_put ? 'p' : '-') + (s.no_delete ? 'd' : '-') +
         (s.prev_kv ? 'v' : '-');
}

}  // namespace

uint64_t Agent::subscribe(std::vector<WatchSpec> specs, Sink sink) {
  Impl& i = *impl_;
  std::vector<WatchEvent> replay;
  std::shared_ptr<WatchCancel> restart;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    id = i.next_sub++;
    Impl::Subscription sub;
    sub.sink = std::move(sink);
    bool reopen = false;
    for (size_t n = 0; n < specs.size(); ++n) {
      const WatchSpec& spec = specs[n];
      // A key of one of this node's ranks going (a ring neighbour's): this
      // agent tells that rank's end itself, and the node's lease takes
      // them together; no watcher for it (etcd keeps each watcher in sync).
      if (spec.no_put && spec.range_end.empty() && i.owned_here(spec.key)) continue;
      const std::string wid = watcher_id(spec);
      auto [it, fresh] = i.watchers.try_emplace(wid);
      Impl::Watcher& w = it->second;
      int64_t next = spec.start_revision;
      if (fresh) {
        w.spec = spec;
        w.resume = w.complete_from = spec.start_revision;
        w.fresh = spec.start_revision > 0;
        reopen = true;
      } else if (spec.start_revision > 0 && spec.start_revision < w.complete_from) {
        // Earlier than this range's stream has kept: open it again from there.
        w.resume = std::min(w.resume, spec.start_revision);
        w.complete_from = spec.start_revision;
        reopen = true;
      } else if (spec.start_revision > 0) {
        for (const auto& [at, e] : w.recent)
          if (at.first >= spec.start_revision) {
            replay.push_back(e);
            replay.back().spec = n;
            next = std::max(next, at.first + 1);
          }
      } else {
        next = w.resume;
      }
      w.subs.emplace_back(id, n);
      sub.watchers.push_back(wid);
      sub.next.push_back(next);
    }
    i.subs.emplace(id, std::move(sub));
    if (reopen) restart = i.stream_cancel;
    if (!replay.empty()) {
      // Told before anything the stream brings later: under the lock.
      i.subs[id].sink(std::move(replay));
    }
  }
  i.watch_cv.notify_all();
  if (restart) restart->cancel();
  return id;
}

void Agent::unsubscribe(uint64_t id) {
  Impl& i = *impl_;
  std::lock_guard<std::mutex> lock(i.mu);
  auto it = i.subs.find(id);
  if (it == i.subs.end()) return;
  for (const std::string& wid : it->second.watchers) {
    auto w = i.watchers.find(wid);
    if (w == i.watchers.end()) continue;
    auto& s = w->second.subs;
    s.erase(std::remove_if(s.begin(), s.end(), [&](const auto& p) { return p.first == id; }),
            s.end());
    if (s.empty()) i.watchers.erase(w);  // the stream drops it when it opens next
  }
  i.subs.erase(it);
}

void Agent::Impl::watch_loop() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    watch_cv.wait(lock, [&] { return stopping || !watchers.empty(); });
    if (stopping) break;
    catch_up(lock);
    if (stopping) break;
    std::vector<WatchSpec> specs;
    std::vector<std::string> ids;
    for (auto& [wid, w] : watchers) {
      specs.push_back(w.spec);
      specs.back().start_revision = w.resume;
      ids.push_back(wid);
    }
    auto cancel = std::make_shared<WatchCancel>();
    stream_cancel = cancel;
    ++counts.streams;
    lock.unlock();
    Status s = etcd->watch(specs, Clock::now() + kWatchSlice, cancel.get(),
                           [&](const std::vector<WatchEvent>& evs, int64_t revision) {
                             deliver(ids, evs, revision);
                             return true;
                           });
    lock.lock();
    stream_cancel.reset();
    if (stopping) break;
    if (s.code == CC_ERR_ABORTED) {
      // A rank's new range: more may come with it (a node's ranks join together).
      lock.unlock();
      std::this_thread::sleep_for(opt.gather);
      lock.lock();
    } else if (!s.ok() && s.code != CC_ERR_TIMEOUT) {
      log().debug("node agent: the node's watch: {}", s.message);
      watch_cv.wait_for(lock, milliseconds(500), [&] { return stopping; });
    }
  }
}

void Agent::Impl::route(Watcher& w, const WatchEvent& e, Routed* out) {
  const int64_t at = e.kv.mod_revision;
  w.resume = std::max(w.resume, at + 1);
  w.recent[{at, e.kv.key}] = e;
  while (w.recent.size() > kRecentEvents) {
    w.recent.erase(w.recent.begin());
    w.complete_from = w.recent.begin()->first.first;
  }
  for (const auto& [sub, n] : w.subs) {
    auto s = subs.find(sub);
    if (s == subs.end() || at < s->second.next[n]) continue;
    out->events[sub].push_back(e);
    out->events[sub].back().spec = n;
    out->seen[sub].emplace_back(n, at);
  }
}

void Agent::Impl::tell(Routed* out) {
  for (auto& [sub, events] : out->events) {
    Subscription& s = subs[sub];
    for (const auto& [n, at] : out->seen[sub]) s.next[n] = std::max(s.next[n], at + 1);
    s.sink(std::move(events));  // under the lock: in order with a replay
  }
}

void Agent::Impl::deliver(const std::vector<std::string>& ids, const std::vector<WatchEvent>& evs,
                          int64_t revision) {
  std::lock_guard<std::mutex> lock(mu);
  saw_revision(revision);
  Routed out;
  for (const WatchEvent& e : evs) {
    if (e.spec >= ids.size()) continue;
    auto it = watchers.find(ids[e.spec]);
    if (it != watchers.end()) route(it->second, e, &out);
  }
  tell(&out);
}

// Where the stream opens, each range is watched from near the present, so
// that etcd never keeps one "unsynced" (kCatchUpGap). How far behind a
// range's resume lies is judged by the newest revision this agent heard of
// (latest_revision); a range far behind is read first:
// - A new range: its puts since its start are told as events, then it is
//   watched from the present. What a read cannot show, a key put twice or
//   deleted in between, does not happen to the ranges ranks watch from far
//   back: the news of a joining generation (its result and mismatch keys
//   are put once; a departure before the result fails the generation
//   through the result) and its members' keys (a delete before the result
//   is the coordinator's to see).
// - A range the stream watched before (the stream ends every kWatchSlice,
//   and opens again for each new range): a quiet one resumes from the
//   present only when the read proves nothing it reacts to happened since
//   its resume (quiet_since); else etcd catches it up from there. Without
//   this, every range a node watched since its join came back that far
//   each time the stream opened, and etcd read its whole history since
//   then, a few hundred watchers a pass: the superlinear cost of large
//   jobs' joins and shrinks.
void Agent::Impl::catch_up(std::unique_lock<std::mutex>& lock) {
  struct Pending {
    std::string wid;
    WatchSpec spec;
    bool fresh;
  };
  std::vector<Pending> pending;
  for (auto& [wid, w] : watchers) {
    const bool fresh = w.fresh;
    w.fresh = false;
    if (w.resume <= 0) continue;  // from the present
    const bool far = latest_revision - w.resume > kCatchUpGap;
    if (far || (fresh && latest_revision == 0)) pending.push_back({wid, w.spec, fresh});
  }
  if (pending.empty()) return;
  lock.unlock();
  std::vector<std::optional<RangeResult>> read(pending.size());
  for (size_t k = 0; k < pending.size(); ++k) {
    RangeResult r;
    if (etcd->range(pending[k].spec.key, pending[k].spec.range_end,
                    after(opt.backend.request_timeout), &r)
            .ok())
      read[k] = std::move(r);
  }
  lock.lock();
  Routed out;
  for (size_t k = 0; k < pending.size(); ++k) {
    auto it = watchers.find(pending[k].wid);
    if (it == watchers.end() || !read[k]) continue;
    Watcher& w = it->second;
    RangeResult& r = *read[k];
    saw_revision(r.revision);
    if (r.revision - w.resume <= kCatchUpGap) continue;  // etcd catches this one up cheaply
    if (!pending[k].fresh) {
      if (quiet_since(w.spec, r, w.resume)) {
        w.resume = r.revision + 1;
        ++counts.resumed_from_present;
      }
      continue;
    }
    std::sort(r.kvs.begin(), r.kvs.end(),
              [](const KeyValue& a, const KeyValue& b) { return a.mod_revision < b.mod_revision; });
    const int64_t from = w.resume;
    for (const KeyValue& kv : r.kvs) {
      if (kv.mod_revision < from || w.spec.no_put) continue;
      WatchEvent e;
      e.kv = kv;
      route(w, e, &out);
    }
    w.resume = std::max(w.resume, r.revision + 1);
  }
  tell(&out);
}

}  // namespace cc::rv::etcd::node
