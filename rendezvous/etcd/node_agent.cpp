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
#include "rendezvous/etcd/node_agent_impl.hpp"
#include "rendezvous/etcd/records.hpp"

namespace cc::rv::etcd::node {

namespace {
constexpr milliseconds kKeepaliveRetry{250};  // after a keepalive etcd did not answer
}  // namespace

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Status Agent::start(const AgentOptions& options, std::unique_ptr<Agent>* out) {
  auto impl = std::make_unique<Impl>(options);
  ClientOptions co;
  if (Status s = client_options(options.backend, &co); !s.ok()) return s;
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
  impl->kept_at = Clock::now();
  Impl* i = impl.get();
  i->keeper = std::thread([i] { i->keep_loop(); });
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
  i.keep_cv.notify_all();
  i.watch_cv.notify_all();
  if (cancel) cancel->cancel();
  if (i.keeper.joinable()) i.keeper.join();
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

// ---- the keeper: the node lease's keepalives ------------------------------------

// On a thread of its own: a claim batch or a task held up by an etcd without
// a leader (its attempts go member after member until its deadline) must not
// hold up the keepalives too, or a short lease expires behind it and takes
// every key of the node with it.
// A keepalive every third of the TTL; one that etcd did not answer (a busy
// leader refuses renewals while its applies lag) is tried again after a
// short pause, not a third later: the lease's whole TTL is its budget.
void Agent::Impl::keep_loop() {
  std::unique_lock<std::mutex> lock(mu);
  bool answered = true;
  while (!stopping) {
    const milliseconds third = milliseconds(std::max<int64_t>(ttl, 1) * 1000) / 3;
    keep_cv.wait_for(lock, answered ? third : kKeepaliveRetry, [&] { return stopping; });
    if (stopping) break;
    answered = frozen || keepalive(lock);
  }
}

// ---- the worker: claims, announcements ----------------------------------------

void Agent::Impl::work() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    work_cv.wait(lock, [&] { return stopping || !claims.empty() || !tasks.empty(); });
    if (stopping) break;
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
    std::vector<Claim> batch = take_batch();
    lock.unlock();
    run_claims(std::move(batch));
    lock.lock();
  }
}

bool Agent::Impl::keepalive(std::unique_lock<std::mutex>& lock) {
  const int64_t id = lease;
  const milliseconds ttl_ms(std::max<int64_t>(ttl, 1) * 1000);
  // Tried until shortly before the lease would end, at least a third.
  const Deadline until = std::max(after(ttl_ms / 3), kept_at + ttl_ms - ttl_ms / 10);
  lock.unlock();
  int64_t left = 0, revision = 0;
  const Clock::time_point sent = Clock::now();
  Status s = etcd->lease_keepalive(id, until, &left, &revision);
  if (!s.ok()) {
    log().debug("node agent: keepalive of the node's lease {:x}: {}", id, s.message);
    lock.lock();
    return false;
  }
  if (left > 0) {
    lock.lock();
    saw_revision(revision);
    if (lease == id) kept_at = sent;
    auto observer = lease_kept;
    lock.unlock();
    if (observer) observer();
    lock.lock();
    return true;
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
    return false;
  }
  lease = fresh;
  if (granted > 0) ttl = granted;
  kept_at = Clock::now();
  auto observer = lease_lost;
  lock.unlock();
  if (observer) observer(id);
  lock.lock();
  return true;
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

}  // namespace cc::rv::etcd::node
