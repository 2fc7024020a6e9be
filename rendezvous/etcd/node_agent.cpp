#include "rendezvous/etcd/node_agent.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "common/log.hpp"
#include "rendezvous/etcd/backend_impl.hpp"
#include "rendezvous/etcd/records.hpp"
#include "rendezvous/etcd/wire.hpp"

namespace cc::rv::etcd::node {

namespace {

using std::chrono::milliseconds;

constexpr size_t kMaxOpsPerSide = 120;  // etcd's default limit is 128
constexpr size_t kRecentEvents = 64;    // kept per watched range, for ranks that come late
constexpr milliseconds kWatchSlice{30000};
// A range whose first rank asks to watch from further back than this many
// revisions is read instead, and watched from the present: etcd would keep
// a watcher that starts behind "unsynced" and catch it up from its history,
// a few hundred watchers a pass, each pass reading every revision since the
// oldest start (a large job's claims put thousands of revisions between a
// node's claim and its watch).
constexpr int64_t kCatchUpGap = 256;
constexpr milliseconds kAgentAttempt{15000};

bool reads(const json& request) {
  for (const json& op : request.value("success", json::array()))
    if (op.contains("request_range")) return true;
  return false;
}

std::string watcher_id(const WatchSpec& s) {
  return s.key + '\0' + s.range_end + '\0' + (s.no_put ? 'p' : '-') + (s.no_delete ? 'd' : '-') +
         (s.prev_kv ? 'v' : '-');
}

}  // namespace

struct Agent::Impl {
  AgentOptions opt;
  std::unique_ptr<Client> etcd;
  std::string node;

  mutable std::mutex mu;
  std::condition_variable work_cv;
  bool stopping = false;
  bool frozen = false;
  int64_t lease = 0;
  int64_t ttl = 0;
  std::function<void(int64_t)> lease_lost;
  std::function<void()> lease_kept;
  Counts counts;

  struct Claim {
    json request;
    ClaimDone done;
  };
  std::deque<Claim> claims;
  std::deque<std::function<void()>> tasks;  // announcements, deletions

  struct Rank {
    std::optional<Membership> membership;
    std::set<std::string> keys;  // put on the node's lease
  };
  std::unordered_map<RankId, Rank> ranks;

  // The watch: ranges by watcher_id, each rank's subscription to some.
  struct Watcher {
    WatchSpec spec;
    int64_t resume = 0;         // where the stream opens again
    int64_t complete_from = 0;  // every event from here on is in `recent`
    std::map<std::pair<int64_t, std::string>, WatchEvent> recent;
    std::vector<std::pair<uint64_t, size_t>> subs;  // subscription, its spec index
    bool fresh = false;                             // new: see kCatchUpGap before its stream opens
  };
  // Events for each subscription, gathered under mu, then told.
  struct Routed {
    std::unordered_map<uint64_t, std::vector<WatchEvent>> events;
    std::unordered_map<uint64_t, std::vector<std::pair<size_t, int64_t>>> seen;
  };
  void route(Watcher& w, const WatchEvent& e, Routed* out);
  void tell(Routed* out);  // under mu
  void catch_up(std::unique_lock<std::mutex>& lock);
  struct Subscription {
    Sink sink;
    std::vector<std::string> watchers;
    std::vector<int64_t> next;
  };
  std::map<std::string, Watcher> watchers;
  std::unordered_map<uint64_t, Subscription> subs;
  uint64_t next_sub = 1;
  std::shared_ptr<WatchCancel> stream_cancel;  // of the running stream
  std::condition_variable watch_cv;

  std::thread worker, watcher;

  explicit Impl(const AgentOptions& o) : opt(o) {
    node = "cc-run, pid " + std::to_string(o.pid) + ", on host " + o.host;
  }

  static Deadline after(milliseconds d) { return Clock::now() + d; }
  bool owned_here(const std::string& key) const {  // under mu
    for (const auto& [id, r] : ranks)
      if (r.keys.count(key) != 0) return true;
    return false;
  }

  void work();
  void keepalive(std::unique_lock<std::mutex>& lock);
  void run_claims(std::vector<Claim> batch);
  void run_alone(Claim& c);
  void watch_loop();
  void deliver(const std::vector<std::string>& ids, const std::vector<WatchEvent>& evs);
  Status delete_keys(const Membership* m, const std::set<std::string>& keys,
                     const std::string& words);
};

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Status Agent::start(const AgentOptions& options, std::unique_ptr<Agent>* out) {
  auto impl = std::make_unique<Impl>(options);
  ClientOptions co;
  if (Status s = client_options(options.backend, &co); !s.ok()) return s;
  // A node's batch is worth waiting for: when a large job's nodes all claim
  // at once etcd answers in seconds, and an attempt given up after the
  // default 2 s is sent again to the next member, doubling the load that
  // made it slow. (A keepalive's own deadline, TTL/3, still bounds it.)
  co.attempt_timeout = std::max(co.attempt_timeout, kAgentAttempt);
  if (Status s = Client::create(co, &impl->etcd); !s.ok()) return s;
  const int64_t want =
      std::max<int64_t>(1, (options.backend.heartbeat_window.count() + 999) / 1000);
  int64_t id = 0, granted = 0;
  if (Status s = impl->etcd->lease_grant(want, Impl::after(options.backend.connect_timeout), &id,
                                         &granted);
      !s.ok())
    return make_status(s.code, "cc-run's node agent cannot take its node's lease: " + s.message);
  impl->lease = id;
  impl->ttl = granted > 0 ? granted : want;
  Impl* i = impl.get();
  i->worker = std::thread([i] { i->work(); });
  i->watcher = std::thread([i] { i->watch_loop(); });
  out->reset(new Agent(std::move(impl)));
  return Status::success();
}

Agent::~Agent() {
  Impl& i = *impl_;
  std::shared_ptr<WatchCancel> cancel;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    i.stopping = true;
    cancel = i.stream_cancel;
  }
  i.work_cv.notify_all();
  i.watch_cv.notify_all();
  if (cancel) cancel->cancel();
  if (i.worker.joinable()) i.worker.join();
  if (i.watcher.joinable()) i.watcher.join();
  if (i.lease != 0 && !i.frozen)
    (void)i.etcd->lease_revoke(i.lease, Impl::after(milliseconds(2000)));
}

int64_t Agent::lease() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lease;
}

int64_t Agent::lease_ttl() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->ttl;
}

const std::string& Agent::node_words() const { return impl_->node; }

void Agent::claim(json request, ClaimDone done) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->claims.push_back({std::move(request), std::move(done)});
  }
  impl_->work_cv.notify_all();
}

void Agent::on_lease_lost(std::function<void(int64_t)> observer) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->lease_lost = std::move(observer);
}

void Agent::on_lease_kept(std::function<void()> observer) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->lease_kept = std::move(observer);
}

void Agent::freeze() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->frozen = true;
}

Agent::Counts Agent::counts() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counts;
}

// ---- the worker: keepalives, claims, announcements ----------------------------

void Agent::Impl::work() {
  std::unique_lock<std::mutex> lock(mu);
  Clock::time_point last_ok = Clock::now();
  while (!stopping) {
    const Clock::time_point due = last_ok + milliseconds(std::max<int64_t>(ttl, 1) * 1000) / 3;
    work_cv.wait_until(lock, due, [&] { return stopping || !claims.empty() || !tasks.empty(); });
    if (stopping) break;
    if (Clock::now() >= due) {
      if (!frozen) keepalive(lock);
      last_ok = Clock::now();
      continue;
    }
    if (!tasks.empty()) {
      auto task = std::move(tasks.front());
      tasks.pop_front();
      lock.unlock();
      task();
      lock.lock();
      continue;
    }
    // Claims: give the node's other ranks a moment to send theirs.
    lock.unlock();
    std::this_thread::sleep_for(opt.gather);
    lock.lock();
    std::vector<Claim> batch;
    size_t compares = 0, puts = 0;
    while (!claims.empty() && batch.size() < opt.max_claims) {
      const json& r = claims.front().request;
      // A claim that also reads (rank 0 reads who came before it) would not
      // see the puts after it in a batch: it goes alone.
      if (reads(r)) {
        if (batch.empty()) {
          batch.push_back(std::move(claims.front()));
          claims.pop_front();
        }
        break;
      }
      const size_t c = r.contains("compare") ? r["compare"].size() : 0;
      const size_t p = r.contains("success") ? r["success"].size() : 0;
      if (!batch.empty() && (compares + c > kMaxOpsPerSide || puts + p > kMaxOpsPerSide)) break;
      compares += c;
      puts += p;
      batch.push_back(std::move(claims.front()));
      claims.pop_front();
    }
    lock.unlock();
    run_claims(std::move(batch));
    lock.lock();
  }
}

void Agent::Impl::keepalive(std::unique_lock<std::mutex>& lock) {
  const int64_t id = lease;
  const milliseconds third = milliseconds(std::max<int64_t>(ttl, 1) * 1000) / 3;
  lock.unlock();
  int64_t left = 0;
  Status s = etcd->lease_keepalive(id, after(third), &left);
  if (!s.ok()) {
    log().debug("node agent: keepalive of the node's lease {:x}: {}", id, s.message);
    lock.lock();
    return;
  }
  if (left > 0) {
    lock.lock();
    auto observer = lease_kept;
    lock.unlock();
    if (observer) observer();
    lock.lock();
    return;
  }
  // The lease expired (this agent stalled, or etcd was out of reach for a
  // whole TTL): the node's keys are gone; a new lease for what comes next.
  log().warn("node agent: the node's etcd lease {:x} expired; its ranks' keys went with it", id);
  int64_t fresh = 0, granted = 0;
  s = etcd->lease_grant(std::max<int64_t>(ttl, 1), after(opt.backend.request_timeout), &fresh,
                        &granted);
  lock.lock();
  if (!s.ok()) {
    log().warn("node agent: cannot take a new lease: {}", s.message);
    return;
  }
  lease = fresh;
  if (granted > 0) ttl = granted;
  auto observer = lease_lost;
  lock.unlock();
  if (observer) observer(id);
  lock.lock();
}

// Whether a claim may share a transaction: its conditions are all "this key
// is absent" and what it reads when they fail is among those keys, so its
// own answer can be cut out of a shared one (below).
bool batchable(const json& request) {
  std::set<std::string> keys;
  for (const json& c : request.value("compare", json::array())) {
    if (c.value("target", "") != "CREATE" || c.value("result", "") != "EQUAL" ||
        c.contains("range_end") || wire::num(c, "create_revision") != 0)
      return false;
    keys.insert(c.value("key", ""));
  }
  for (const json& op : request.value("failure", json::array())) {
    auto r = op.find("request_range");
    if (r == op.end() || r->contains("range_end") || keys.count(r->value("key", "")) == 0)
      return false;
  }
  return !reads(request);
}

// The batch as one transaction: every claim's conditions (each key once)
// and its puts. When it succeeds each claim gets its puts' answers. When it
// fails, one read of every key the conditions name tells which claims
// failed: each of those gets the answer it would have had alone, now (its
// own reads); the others go into the next batch. A batch sent twice (an
// answer lost, the attempt repeated on another member) thus costs two more
// requests, not one per claim. (Reads in the batch's own failure branch
// would save one, but made every successful batch cost etcd more.)
void Agent::Impl::run_claims(std::vector<Claim> batch) {
  {
    std::lock_guard<std::mutex> lock(mu);
    counts.claims += batch.size();
  }
  std::vector<Claim> alone;
  if (batch.size() > 1) {
    std::vector<Claim> shared;
    for (Claim& c : batch) (batchable(c.request) ? shared : alone).push_back(std::move(c));
    batch = std::move(shared);
  } else {
    alone = std::move(batch);
    batch.clear();
  }
  if (batch.size() == 1) alone.push_back(std::move(batch.front()));
  if (batch.size() > 1) {
    json merged{{"compare", json::array()}, {"success", json::array()}};
    json reads{{"success", json::array()}};
    std::vector<std::string> keys;  // base64, in the order of the failure's reads
    std::vector<size_t> puts;
    for (const Claim& c : batch) {
      for (const json& cmp : c.request.value("compare", json::array())) {
        const std::string key = cmp.value("key", "");
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
        keys.push_back(key);
        merged["compare"].push_back(cmp);
        reads["success"].push_back(json{{"request_range", json{{"key", key}}}});
      }
      const json success = c.request.value("success", json::array());
      puts.push_back(success.size());
      for (const json& op : success) merged["success"].push_back(op);
    }
    std::string text;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counts.transactions;
    }
    Status s = etcd->txn_text(merged.dump(), after(opt.backend.request_timeout), &text);
    json answer = s.ok() ? json::parse(text, nullptr, false) : json();
    json responses = answer.is_object() ? answer.value("responses", json::array()) : json::array();
    json header = answer.is_object() ? answer.value("header", json::object()) : json();
    if (answer.is_object() && !wire::flag(answer, "succeeded")) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++counts.transactions;
      }
      s = etcd->txn_text(reads.dump(), after(opt.backend.request_timeout), &text);
      answer = s.ok() ? json::parse(text, nullptr, false) : json();
      if (answer.is_object()) {
        responses = answer.value("responses", json::array());
        header = answer.value("header", json::object());
        answer.erase("succeeded");  // what the batch did, for the branches below
      }
    }
    if (!s.ok() || !answer.is_object()) {
      log().debug("node agent: a batch of {} claims: {}", batch.size(), s.message);
      for (Claim& c : batch) alone.push_back(std::move(c));
    } else if (wire::flag(answer, "succeeded") && responses.size() == merged["success"].size()) {
      size_t at = 0;
      for (size_t k = 0; k < batch.size(); ++k) {
        json one{{"header", header}, {"succeeded", true}, {"responses", json::array()}};
        for (size_t n = 0; n < puts[k]; ++n) one["responses"].push_back(responses[at++]);
        batch[k].done(Status::success(), one.dump());
      }
    } else if (!wire::flag(answer, "succeeded") && responses.size() == keys.size()) {
      std::map<std::string, json> read;  // key -> its range answer
      for (size_t k = 0; k < keys.size(); ++k) read[keys[k]] = responses[k];
      const auto present = [&](const std::string& key) {
        const json range = read[key].value("response_range", json::object());
        return !range.value("kvs", json::array()).empty();
      };
      std::vector<Claim> again;
      for (Claim& c : batch) {
        bool held = true;
        for (const json& cmp : c.request.value("compare", json::array()))
          held = held && !present(cmp.value("key", ""));
        if (held) {
          again.push_back(std::move(c));
          continue;
        }
        json one{{"header", header}, {"responses", json::array()}};
        for (const json& op : c.request.value("failure", json::array()))
          one["responses"].push_back(read[op["request_range"].value("key", "")]);
        c.done(Status::success(), one.dump());
      }
      if (!again.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        for (auto it = again.rbegin(); it != again.rend(); ++it) claims.push_front(std::move(*it));
        counts.claims -= again.size();  // counted again with their next batch
      }
    } else {
      for (Claim& c : batch) alone.push_back(std::move(c));
    }
  }
  for (Claim& c : alone) run_alone(c);
}

void Agent::Impl::run_alone(Claim& c) {
  {
    std::lock_guard<std::mutex> lock(mu);
    ++counts.transactions;
  }
  std::string text;
  Status s = etcd->txn_text(c.request.dump(), after(opt.backend.request_timeout), &text);
  c.done(s, text);
}

// ---- what ranks tell of themselves --------------------------------------------

void Agent::own(RankId rank, std::string key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ranks[rank].keys.insert(std::move(key));
}

void Agent::member(RankId rank, Membership m) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->ranks[rank].membership = std::move(m);
}

namespace {

// Takes the keys under `generation` out of `keys`.
std::set<std::string> take_under(std::set<std::string>* keys, const std::string& generation) {
  std::set<std::string> out;
  for (auto it = keys->lower_bound(generation);
       it != keys->end() && it->compare(0, generation.size(), generation) == 0;)
    out.insert(keys->extract(it++).value());
  return out;
}

}  // namespace

void Agent::left(RankId rank, const std::string& generation) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->ranks.find(rank);
  if (it == impl_->ranks.end()) return;
  if (it->second.membership && it->second.membership->generation == generation)
    it->second.membership.reset();
  // Its member key stays for the others (off the lease); the rest is theirs to remove.
  (void)take_under(&it->second.keys, generation);
}

void Agent::ended(RankId rank, const std::string& generation) {
  Impl& i = *impl_;
  std::set<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    auto it = i.ranks.find(rank);
    if (it == i.ranks.end()) return;
    if (it->second.membership && it->second.membership->generation == generation)
      it->second.membership.reset();
    keys = take_under(&it->second.keys, generation);
    if (keys.empty()) return;
    i.tasks.push_back([&i, keys] { (void)i.delete_keys(nullptr, keys, {}); });
  }
  i.work_cv.notify_all();
}

void Agent::rank_gone(RankId rank, const std::string& words) {
  Impl& i = *impl_;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    auto it = i.ranks.find(rank);
    if (it == i.ranks.end()) return;
    Impl::Rank r = std::move(it->second);
    i.ranks.erase(it);
    if (!r.membership && r.keys.empty()) return;
    i.tasks.push_back([&i, r = std::move(r), words] {
      if (Status s = i.delete_keys(r.membership ? &*r.membership : nullptr, r.keys, words); !s.ok())
        log().warn("node agent: telling that rank {} {}: {}",
                   r.membership ? r.membership->rank : -1, words, s.message);
    });
  }
  i.work_cv.notify_all();
}

// One transaction: the departure told once (unless the rank, or another,
// already did), and the rank's keys deleted, as its own lease's end would.
Status Agent::Impl::delete_keys(const Membership* m, const std::set<std::string>& keys,
                                const std::string& words) {
  Txn t;
  for (const std::string& k : keys) t.failure.push_back(Op::del(k));
  if (m != nullptr) {
    Departure d{PeerEventKind::failed, m->rank, m->host, m->pid, words};
    t.compare = {Compare::absent(m->gone)};
    t.success = {Op::put(m->gone, departure_word(d.kind)), Op::put(m->events, encode(d))};
    for (const std::string& k : keys) t.success.push_back(Op::del(k));
    log().info("node agent: rank {} (pid {}) {}: telling the others", m->rank, m->pid, words);
  } else {
    t.success = std::move(t.failure);
    t.failure.clear();
  }
  if (t.success.empty()) return Status::success();
  TxnResult r;
  return etcd->txn(t, after(opt.backend.request_timeout), &r);
}

// ---- the watch -------------------------------------------------------------

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
                           [&](const std::vector<WatchEvent>& evs, int64_t) {
                             deliver(ids, evs);
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

void Agent::Impl::deliver(const std::vector<std::string>& ids, const std::vector<WatchEvent>& evs) {
  std::lock_guard<std::mutex> lock(mu);
  Routed out;
  for (const WatchEvent& e : evs) {
    if (e.spec >= ids.size()) continue;
    auto it = watchers.find(ids[e.spec]);
    if (it != watchers.end()) route(it->second, e, &out);
  }
  tell(&out);
}

// New ranges whose start lies far behind the cluster's revision are read
// (their puts since the start told as events) and then watched from the
// present, so that etcd never keeps them unsynced (kCatchUpGap). What a
// read cannot show, a key put twice or deleted in between, does not happen
// to the ranges ranks watch from far back: the news of a joining
// generation (its result and mismatch keys are put once; a departure before
// the result fails the generation through the result) and its members'
// keys (a delete before the result is the coordinator's to see).
void Agent::Impl::catch_up(std::unique_lock<std::mutex>& lock) {
  std::vector<std::pair<std::string, WatchSpec>> fresh;
  for (auto& [wid, w] : watchers)
    if (w.fresh) {
      w.fresh = false;
      fresh.emplace_back(wid, w.spec);
    }
  if (fresh.empty()) return;
  lock.unlock();
  std::vector<std::optional<RangeResult>> read(fresh.size());
  for (size_t k = 0; k < fresh.size(); ++k) {
    RangeResult r;
    if (etcd->range(fresh[k].second.key, fresh[k].second.range_end,
                    after(opt.backend.request_timeout), &r)
            .ok())
      read[k] = std::move(r);
  }
  lock.lock();
  Routed out;
  for (size_t k = 0; k < fresh.size(); ++k) {
    auto it = watchers.find(fresh[k].first);
    if (it == watchers.end() || !read[k]) continue;
    Watcher& w = it->second;
    RangeResult& r = *read[k];
    if (r.revision - w.resume <= kCatchUpGap) continue;  // etcd catches this one up cheaply
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
