// The etcd backend: connection, membership lease and its
// keepalive thread, the members' watch thread, leave and abort. The join
// lives in backend_join.cpp, the store in backend_store.cpp.
#include "rendezvous/etcd/backend.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <unordered_set>

#include "common/log.hpp"
#include "rendezvous/etcd/backend_impl.hpp"
#include "rendezvous/rules/event_rules.hpp"
#include "rendezvous/rules/join_rules.hpp"

namespace cc::rv::etcd {

namespace {

constexpr milliseconds kFollowSlice{30000};  // the follower opens its etcd watch again this often

}  // namespace

// ---- Impl helpers ------------------------------------------------------------

Deadline Backend::Impl::after(milliseconds d) {
  if (d.count() >= (1LL << 40)) return Deadline::max();
  return Clock::now() + d;
}

std::string Backend::Impl::next_op_id() {
  return id_base + "-" + std::to_string(op_counter.fetch_add(1));
}

int64_t Backend::Impl::ttl_seconds(milliseconds window) {
  return std::max<int64_t>(1, (window.count() + 999) / 1000);
}

void Backend::Impl::push_event(PeerEvent e) {
  {
    std::lock_guard<std::mutex> lock(ev_mu);
    events.push_back(std::move(e));
  }
  ev_cv.notify_all();
}

void Backend::Impl::drop_events() {
  std::lock_guard<std::mutex> lock(ev_mu);
  events.clear();
}

Status Backend::Impl::ensure_lease(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu);
  if (lease != 0) return Status::success();
  const int64_t ttl = ttl_seconds(window);
  lock.unlock();
  int64_t id = 0, granted = 0, revision = 0;
  if (node) {  // the node's lease, which its agent keeps alive
    std::string words;
    if (Status s = node->lease(deadline, &id, &granted, &words); !s.ok()) return s;
    lock.lock();
    node_words = std::move(words);
  } else {
    if (Status s = etcd->lease_grant(ttl, deadline, &id, &granted, &revision); !s.ok()) return s;
    lock.lock();
  }
  lease = id;
  lease_ttl = granted > 0 ? granted : ttl;
  if (!keeper.joinable()) keeper = std::thread([this] { keep_alive(); });
  keeper_cv.notify_all();
  return Status::success();
}

// Keeps the lease alive every TTL/3 (each keepalive tries the endpoints in
// turn for up to TTL/3) and carries out an abort asked without waiting.
void Backend::Impl::keep_alive() {
  std::unique_lock<std::mutex> lock(mu);
  Clock::time_point last_ok = Clock::now();
  int64_t kept = 0;  // the lease last_ok belongs to
  while (!stopping) {
    const auto ttl = milliseconds(std::max<int64_t>(lease_ttl, 1) * 1000);
    if (lease != kept) {  // a new lease: granted just now
      kept = lease;
      last_ok = Clock::now();
    }
    const auto woken = [&] { return stopping || pending_abort.has_value() || lease != kept; };
    if (kept == 0 || node)
      keeper_cv.wait(lock, woken);  // no lease now, or the node's agent keeps it
    else
      keeper_cv.wait_until(lock, last_ok + ttl / 3, woken);
    if (stopping) break;
    if (pending_abort) {
      const std::string reason = std::move(*pending_abort);
      pending_abort.reset();
      lock.unlock();
      if (Status s = do_abort(reason); !s.ok())
        log().debug("etcd: telling the job about the abort: {}", s.message);
      lock.lock();
      continue;
    }
    const int64_t id = lease;
    if (id == 0 || id != kept) continue;
    lock.unlock();
    int64_t ttl_left = 0;
    const Clock::time_point sent = Clock::now();
    Status s = etcd->lease_keepalive(id, sent + ttl / 3, &ttl_left);
    lock.lock();
    if (!s.ok()) {  // tried again a third of the TTL later (a busy etcd is not flooded)
      log().debug("etcd: keepalive of lease {:x}: {}", id, s.message);
      last_ok = sent;
      continue;
    }
    if (ttl_left > 0) {
      last_ok = sent;
      continue;
    }
    if (lease == id && !leaving) {
      lease = 0;
      if (joining) {  // the join claims its rank again on a new lease
        lease_lost = true;
        result_cv.notify_all();
        continue;
      }
      const bool was_member = member;
      member = false;
      lock.unlock();
      if (was_member) lost_membership("its lease expired before a keepalive reached etcd");
      lock.lock();
    }
  }
}

void Backend::Impl::lost_membership(const std::string& how) {
  log().warn("etcd: {} of job {}: this rank's membership ended: {}", member_who(me),
             quote(opt.job_id), how);
  push_event(PeerEvent{
      PeerEventKind::server_stopping, -1, "", 0,
      "etcd (" + etcd->address().endpoint_list() + ") dropped this rank's membership of job " +
          quote(opt.job_id) + ": " + how + " (keepalives did not get through within the " +
          std::to_string(lease_ttl) +
          " s heartbeat window: etcd lost its quorum, or this host was cut off or stalled); the "
          "other ranks consider this rank failed"});
}

void Backend::Impl::tell_agent_member() {
  if (!node) return;
  node::Membership m;
  {
    std::lock_guard<std::mutex> lock(mu);
    const Gen g = current();
    m.generation = keys.generation(g);
    m.gone = keys.gone(g, position);
    m.events = keys.events(g);
    m.rank = position;
    m.host = me.host;
    m.pid = me.pid;
  }
  node->member(m);
}

// As keep_alive() when its lease expired: a joining rank claims again on the
// node's new lease; a member's membership has ended.
void Backend::Impl::node_lease_lost(int64_t old, const std::string& how) {
  std::unique_lock<std::mutex> lock(mu);
  if (old != 0 && lease != old) return;
  if (leaving || stopping) return;
  lease = 0;
  if (joining) {
    lease_lost = true;
    result_cv.notify_all();
    return;
  }
  const bool was_member = member;
  member = false;
  lock.unlock();
  if (was_member) lost_membership(how);
}

// The generation follower: the generation's one etcd watch stream, from the
// join to the leave, with two watchers on keys that only rare writes touch
// (so no write elsewhere in the generation costs etcd work for them): the
// news/ prefix (keys.hpp: the result's put, how the join ended; the events
// key, each departure, announced once; the mismatch keys, the ranks' calls
// differ, put by rank 0 alone, once per line: backend_calls.cpp), and the
// next rank's member key (its delete: a lease expired). Ranks watch their
// neighbour in a ring, so a death is seen by one rank, which announces it to
// all through the events key.
void Backend::Impl::follow_generation(const Followed& w, int64_t from) {
  const Gen g = w.at;
  int64_t next_news = from, next_neighbour = from;
  const int32_t neighbour = w.world > 1 ? (w.position + 1) % w.world : -1;
  const int32_t neighbour_key =
      neighbour < 0 || w.ring.empty() ? neighbour : w.ring[static_cast<size_t>(neighbour)];
  std::vector<bool> told(static_cast<size_t>(std::max(w.world, 1)), false);
  size_t announced = 0;
  std::vector<WatchEvent> early;  // the neighbour's delete before the result came
  std::set<std::pair<uint32_t, int32_t>> mismatch_told;  // by line (backend_calls.cpp)
  const std::string news = keys.news(g), result = keys.result(g), events = keys.events(g),
                    mismatch = keys.mismatch(g, 0, 0);
  while (!follower_cancel->cancelled()) {
    // The news (result, events, mismatch keys: puts) in one watcher; the
    // neighbour's member key matters when it goes, with what it held.
    std::vector<WatchSpec> specs(1);
    specs[0].key = news;
    specs[0].range_end = prefix_end(news);
    specs[0].start_revision = next_news;
    specs[0].no_delete = true;
    if (neighbour >= 0) {
      WatchSpec n;
      n.key = keys.member(g, neighbour_key);
      n.start_revision = next_neighbour;
      n.no_put = true;
      n.prev_kv = true;
      specs.push_back(std::move(n));
    }
    log().debug(
        "etcd: job {}: communicator {}, generation {}: watching from revision {} (news), "
        "{} (rank {}'s key)",
        quote(opt.job_id), g.g, g.generation, next_news, next_neighbour, neighbour_key);
    const auto on_events = [&](const std::vector<WatchEvent>& evs, int64_t) {
      for (const WatchEvent& e : evs) {
        if (e.spec == 0) {
          next_news = std::max(next_news, e.kv.mod_revision + 1);
          if (e.kv.key == result)
            on_result(g, e, &early);
          else if (e.kv.key == events)
            on_departure(e, &told, &announced);
          else if (e.kv.key.compare(0, mismatch.size(), mismatch) == 0)
            on_mismatch(e, &mismatch_told);
          continue;
        }
        next_neighbour = std::max(next_neighbour, e.kv.mod_revision + 1);
        if (e.type != WatchEvent::Type::del) continue;
        int64_t checked = -1;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (join_result && join_result->ok)
            checked = join_result->checked_revision;
          else if (!join_result)
            early.push_back(e);
        }
        if (checked >= 0 && e.kv.mod_revision > checked) neighbour_gone(g, neighbour, e);
      }
      return true;
    };
    const Deadline slice = Clock::now() + kFollowSlice;
    Status s = node ? node->watch(specs, slice, follower_cancel.get(), on_events)
                    : etcd->watch(specs, slice, follower_cancel.get(), on_events);
    if (s.code == CC_ERR_ABORTED) return;
    if (s.ok() || s.code == CC_ERR_TIMEOUT) continue;
    log().debug("etcd: watching communicator {}, generation {} of job {}: {}", g.g, g.generation,
                quote(opt.job_id), s.message);
    std::unique_lock<std::mutex> lock(mu);
    follower_error = s;
    result_cv.notify_all();
    keeper_cv.wait_for(lock, milliseconds(1000),
                       [&] { return stopping || follower_cancel->cancelled(); });
  }
}

void Backend::Impl::on_result(Gen g, const WatchEvent& e, std::vector<WatchEvent>* early) {
  ResultRecord res;
  if (!decode(e.kv.value, &res)) return;
  std::vector<WatchEvent> departed;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (join_result) return;
    join_result = res;
    if (res.ok)
      for (const WatchEvent& d : *early)
        if (d.kv.mod_revision > res.checked_revision) departed.push_back(d);
    early->clear();
  }
  result_cv.notify_all();
  for (const WatchEvent& d : departed)
    if (auto rank = keys.member_rank(g, d.kv.key)) neighbour_gone(g, *rank, d);
}

// A departure on the events key: a peer event (at most kMaxAnnounced, one per rank).
void Backend::Impl::on_departure(const WatchEvent& e, std::vector<bool>* told, size_t* announced) {
  Departure d;
  if (!decode(e.kv.value, &d)) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (d.rank == position) return;  // its own announcement
  }
  if (d.rank < 0 || static_cast<size_t>(d.rank) >= told->size() ||
      (*told)[static_cast<size_t>(d.rank)])
    return;
  (*told)[static_cast<size_t>(d.rank)] = true;
  if (*announced >= kMaxAnnounced) {
    log().warn("etcd: job {}: rank {} {} too (not announced: {} departures already)",
               quote(opt.job_id), d.rank, departure_word(d.kind), *announced);
    return;
  }
  ++*announced;
  log().warn("etcd: job {}: rank {} ({} pid {}) {}: {}", quote(opt.job_id), d.rank, d.host, d.pid,
             departure_word(d.kind), d.reason);
  push_event(std::move(d));
}

// The next rank's member key went with its lease: announce it, unless it (or
// another rank) already did.
void Backend::Impl::neighbour_gone(Gen g, int32_t rank, const WatchEvent& e) {
  Departure d;
  d.rank = rank;
  MemberRecord rec;
  if (e.prev_kv && decode(e.prev_kv->value, &rec)) {
    d.host = rec.info.host;
    d.pid = rec.info.pid;
  }
  if (!rec.node.empty()) {
    d.with = lost_with(g, rank, e);
    d.reason = "its node agent (" + rec.node +
               ") was lost: the node's etcd lease expired: no keepalive reached etcd within its " +
               std::to_string(lease_ttl) +
               " s heartbeat window (the host went down, cc-run was killed or stalled, or its "
               "network was cut)";
  } else {
    d.reason = "its etcd lease expired: no keepalive reached etcd within its " +
               std::to_string(lease_ttl) +
               " s heartbeat window (the process died or stalled, its host went down, or its "
               "network was cut)";
  }
  if (Status s = announce(g, d, after(opt.request_timeout)); !s.ok())
    log().warn("etcd: job {}: announcing that rank {} is gone: {}", quote(opt.job_id), rank,
               s.message);
}

// The ranks after `rank` in the ring whose member keys went with its node's
// lease, in the same revision as its own: the rest of a node whose agent was
// lost, told with it in one event (at most one agent's ranks).
std::vector<int32_t> Backend::Impl::lost_with(Gen g, int32_t rank, const WatchEvent& e) {
  std::vector<int32_t> with;
  const int64_t node_lease = e.prev_kv ? e.prev_kv->lease : 0;
  const int64_t before = e.kv.mod_revision - 1;
  std::vector<int32_t> by_rank;
  int32_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    by_rank = ring;
    n = world;
  }
  if (node_lease == 0 || n <= 1) return with;
  const Deadline deadline = after(opt.request_timeout);
  for (int32_t k = (rank + 1) % n, steps = 0; k != rank && steps < 4096; k = (k + 1) % n, ++steps) {
    const int32_t key_rank = by_rank.empty() ? k : by_rank[static_cast<size_t>(k)];
    std::optional<KeyValue> now, then;
    if (!etcd->get(keys.member(g, key_rank), deadline, &now, nullptr).ok() || now) break;
    if (!etcd->get_at(keys.member(g, key_rank), before, deadline, &then).ok() || !then ||
        then->lease != node_lease)
      break;
    with.push_back(k);
  }
  return with;
}

// Puts a departure on the events key, once per rank (and once for the ranks
// that went with it).
Status Backend::Impl::announce(Gen g, const Departure& d, Deadline deadline) {
  Txn t;
  t.compare = {Compare::absent(keys.gone(g, d.rank))};
  t.success = {Op::put(keys.gone(g, d.rank), departure_word(d.kind)),
               Op::put(keys.events(g), encode(d))};
  for (int32_t k : d.with) t.success.push_back(Op::put(keys.gone(g, k), departure_word(d.kind)));
  TxnResult r;
  return etcd->txn(t, deadline, &r);
}

void Backend::Impl::stop_follower() {
  if (follower_cancel) follower_cancel->cancel();
  if (follower.joinable()) follower.join();
}

void Backend::Impl::start_follower(Followed w, int64_t from, std::optional<ResultRecord> known) {
  stop_follower();
  {
    std::lock_guard<std::mutex> lock(mu);
    join_result = std::move(known);
    follower_error = Status::success();
  }
  follower_cancel = std::make_unique<WatchCancel>();
  follower = std::thread([this, w = std::move(w), from] { follow_generation(w, from); });
}

// Tells every other rank why this rank goes (events key), then, unless it
// aborted, revokes its lease.
Status Backend::Impl::announce_departure(PeerEventKind kind, const std::string& reason,
                                         Deadline deadline) {
  Gen g{0};
  Departure d;
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!member) return Status::success();
    g = current();
    d = Departure{kind, position, me.host, me.pid, reason};
    if (kind != PeerEventKind::aborted) {
      id = lease;
      leaving = true;
      member = false;
    }
  }
  if (kind == PeerEventKind::aborted) return announce(g, d, deadline);
  stop_follower();
  Status s = announce(g, d, deadline);
  if (node) {  // its keys go as its own lease's revoke would take them
    node->ended(keys.generation(g));
  } else if (id != 0) {
    Status r = etcd->lease_revoke(id, deadline);
    if (s.ok()) s = r;
    std::lock_guard<std::mutex> lock(mu);
    if (lease == id) lease = 0;
  }
  return s;
}

Status Backend::Impl::do_abort(const std::string& reason) {
  std::optional<std::pair<uint32_t, MemberInfo>> pending;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (joining) pending.emplace(join_comm_number, join_info);
  }
  if (pending) {
    const auto& [g, info] = *pending;
    // A pending join fails its whole generation: nobody waits for an aborted rank.
    (void)fail_generation(g, CC_ERR_ABORTED,
                          rules::aborted_while_joining_words(
                              member_who(info), rules::communicator_where(opt.job_id, g), reason),
                          after(opt.request_timeout));
  }
  return announce_departure(PeerEventKind::aborted, reason, after(opt.request_timeout));
}

// ---- Backend -----------------------------------------------------------------

Backend::Backend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Backend::~Backend() {
  Impl& i = *impl_;
  i.stop_call_check();
  bool was_member = false;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    was_member = i.member;
  }
  // Gone without leaving: the others are told now, not a TTL later.
  if (was_member)
    (void)i.announce_departure(PeerEventKind::failed, rules::closed_without_leaving_words(),
                               i.after(i.opt.request_timeout));
  i.stop_follower();
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    id = i.lease;
    i.lease = 0;
    i.stopping = true;
  }
  i.keeper_cv.notify_all();
  if (i.keeper.joinable()) i.keeper.join();
  if (i.node)
    i.node.reset();  // the lease is the node's; what was this rank's went with its departure
  else if (id != 0)
    (void)i.etcd->lease_revoke(id, Clock::now() + milliseconds(2000));
}

Status client_options(const BackendOptions& options, ClientOptions* out) {
  ClientOptions co;
  if (Status s = parse_address(options.address, &co.address); !s.ok()) return s;
  co.ca_file = options.ca_file;
  co.cert_file = options.cert_file;
  co.key_file = options.key_file;
  co.auth_file = options.auth_file;
  co.local_address = options.local_address;
  co.attempt_timeout = options.attempt_timeout;
  co.connect_timeout = options.attempt_connect_timeout;
  *out = std::move(co);
  return Status::success();
}

Status Backend::connect(const BackendOptions& options, std::unique_ptr<Backend>* out) {
  ClientOptions co;
  if (Status s = client_options(options, &co); !s.ok()) return s;
  auto impl = std::make_unique<Impl>(options);
  if (Status s = EtcdClient::create(co, &impl->etcd); !s.ok()) return s;
  if (options.member && !options.agent_socket.empty()) {
    if (Status s = node::Link::connect(options.agent_socket, &impl->node); !s.ok()) return s;
    Impl* i = impl.get();
    i->etcd->on_leased_put([i](const std::string& key) { i->node->own(key); });
    i->node->on_lost([i](const std::string& why) { i->node_lease_lost(0, why); });
    i->node->on_lease_lost([i](int64_t old) {
      i->node_lease_lost(old,
                         "the node's etcd lease expired before its agent's keepalive "
                         "reached etcd");
    });
  }
  impl->endpoint_text = co.address.text();
  // A rank's first request proves etcd reachable (and the password right):
  // its membership lease, or for a store the member list.
  Status s = options.member ? impl->ensure_lease(Impl::after(options.connect_timeout))
                            : impl->etcd->check(Impl::after(options.connect_timeout));
  if (!s.ok()) return make_status(s.code, "cannot use the rendezvous: " + s.message);
  out->reset(new Backend(std::move(impl)));
  return Status::success();
}

Status Backend::leave() {
  Impl& i = *impl_;
  Gen g{0};
  int32_t rank = -1, world = 0;
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    if (!i.member) return Status::success();
    g = i.current();
    rank = i.key_rank();
    world = i.world;
    id = i.lease;
    i.leaving = true;
    i.member = false;
  }
  i.stop_call_check();
  i.stop_follower();
  if (i.node) i.node->left(i.keys.generation(g));
  const Deadline d = i.after(i.opt.request_timeout);
  // The member key leaves the lease first (a put the others' watch filters
  // out), so revoking the lease deletes nothing they watch.
  Txn t;
  t.compare = {Compare::lease_is(i.keys.member(g, rank), id)};
  t.success = {Op::move_to_lease(i.keys.member(g, rank), 0),
               Op::put(i.keys.leaves(g), "", 0, true)};
  TxnResult r;
  Status s = i.etcd->txn(t, d, &r);
  if (id != 0 && !i.node) {  // the node's lease stays, for its other ranks
    (void)i.etcd->lease_revoke(id, d);
    std::lock_guard<std::mutex> lock(i.mu);
    if (i.lease == id) i.lease = 0;
  }
  if (!s.ok()) return s;
  if (r.succeeded && r.responses.size() == 2) {
    const int64_t leaves = r.responses[1].prev_kv ? r.responses[1].prev_kv->version + 1 : 1;
    if (leaves >= world)
      (void)i.etcd->delete_range(i.keys.generation(g), prefix_end(i.keys.generation(g)), d);
  }
  return Status::success();
}

Status Backend::heartbeat(uint64_t last_completed) {
  impl_->last_completed.store(last_completed);
  return Status::success();
}

Status Backend::heartbeat_nowait(uint64_t last_completed) { return heartbeat(last_completed); }

Status Backend::set_heartbeat_window(milliseconds window) {
  Impl& i = *impl_;
  if (window.count() <= 0) return Status::success();
  int64_t old = 0;
  Gen g{0};
  int32_t rank = -1;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    i.window = window;
    if (i.node) return Status::success();  // the node's agent holds the lease, of its window
    if (i.lease == 0 || Impl::ttl_seconds(window) == i.lease_ttl) return Status::success();
    old = i.lease;
    if (i.member) {
      g = i.current();
      rank = i.key_rank();
    }
    if (!i.member) i.lease = 0;  // the next join takes a lease of the new length
  }
  if (rank < 0) {
    (void)i.etcd->lease_revoke(old, i.after(i.opt.request_timeout));
    return Status::success();
  }
  // A member moves its key onto a lease of the new length.
  const Deadline d = i.after(i.opt.request_timeout);
  int64_t fresh = 0, granted = 0;
  if (Status s = i.etcd->lease_grant(Impl::ttl_seconds(window), d, &fresh, &granted); !s.ok())
    return s;
  Txn t;
  t.compare = {Compare::lease_is(i.keys.member(g, rank), old)};
  t.success = {Op::move_to_lease(i.keys.member(g, rank), fresh)};
  TxnResult r;
  if (Status s = i.etcd->txn(t, d, &r); !s.ok()) {
    (void)i.etcd->lease_revoke(fresh, d);
    return s;
  }
  if (!r.succeeded) {
    (void)i.etcd->lease_revoke(fresh, d);
    return make_status(CC_ERR_RENDEZVOUS, "rank " + std::to_string(rank) + " of job " +
                                              quote(i.opt.job_id) +
                                              " is no longer a member on etcd (its lease expired)");
  }
  {
    std::lock_guard<std::mutex> lock(i.mu);
    i.lease = fresh;
    i.lease_ttl = granted > 0 ? granted : Impl::ttl_seconds(window);
  }
  i.keeper_cv.notify_all();
  (void)i.etcd->lease_revoke(old, d);
  return Status::success();
}

Status Backend::progress(uint32_t comm_number, int32_t rank, Progress* out, milliseconds timeout) {
  uint32_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    generation = impl_->generation;
  }
  return progress_in(comm_number, generation, rank, out, timeout);
}

Status Backend::progress_in(uint32_t comm_number, uint32_t generation, int32_t rank, Progress* out,
                            milliseconds timeout) {
  Impl& i = *impl_;
  if (rank < 0)
    return make_status(
        CC_ERR_INVALID_USAGE,
        "the etcd rendezvous does not collect each rank's progress (it would cost a write per "
        "heartbeat per rank); look at each rank's log for its last completed operation");
  out->members.clear();
  bool need_roster = false;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    if (!i.member || comm_number != i.comm_number || generation != i.generation)
      return Status::success();
    need_roster = i.members.empty();
  }
  if (need_roster) {  // read once, when a rank first needs another's host
    std::optional<KeyValue> kv;
    if (Status s = i.etcd->get(i.keys.roster(Gen{comm_number, generation}), Clock::now() + timeout,
                               &kv, nullptr);
        !s.ok())
      return s;
    RosterRecord roster;
    if (kv && decode(kv->value, &roster)) {
      std::lock_guard<std::mutex> lock(i.mu);
      i.members = std::move(roster.members);
    }
  }
  std::lock_guard<std::mutex> lock(i.mu);
  if (rank < static_cast<int32_t>(i.members.size())) {
    const MemberSummary& m = i.members[static_cast<size_t>(rank)];
    MemberProgress p;
    p.rank = m.rank;
    p.host = m.host;
    p.pid = m.pid;
    p.last_completed = m.rank == i.position ? i.last_completed.load() : 0;
    out->members.push_back(p);
  }
  return Status::success();
}

std::chrono::steady_clock::time_point Backend::last_heard() const {
  // Behind an agent, etcd answers the node's keepalives, not this rank's.
  if (impl_->node) return std::max(impl_->node->last_heard(), impl_->etcd->last_answer());
  return impl_->etcd->last_answer();
}

Status Backend::abort(const std::string& reason) {
  return impl_->do_abort(rules::abort_reason(reason));
}

Status Backend::abort_nowait(const std::string& reason) {
  Impl& i = *impl_;
  std::lock_guard<std::mutex> lock(i.mu);
  if (!i.keeper.joinable()) return Status::success();  // never joined: nobody to tell
  i.pending_abort = rules::abort_reason(reason);
  i.keeper_cv.notify_all();
  return Status::success();
}

// The failing rank's words go on the events key (as init_failed) and its
// lease is revoked: every other rank's watch has them at once. While its
// join of that communicator is pending, it fails the generation instead, as
// an abort does (cc's server: server_core/init_failures.cpp, rule 2).
Status Backend::init_failed(uint32_t comm_number, const std::string& reason, milliseconds timeout) {
  Impl& i = *impl_;
  const std::string words = rules::init_failed_reason(reason);
  std::optional<MemberInfo> joining;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    if (i.joining && i.join_comm_number == comm_number) joining = i.join_info;
  }
  if (joining) {  // its words are the generation's result (fail_generation returns them)
    (void)i.fail_generation(
        comm_number, CC_ERR_PEER_FAILED,
        rules::init_failed_while_joining_words(
            member_who(*joining), rules::communicator_where(i.opt.job_id, comm_number), words),
        Impl::after(timeout));
    return Status::success();
  }
  return i.announce_departure(PeerEventKind::init_failed, words, Impl::after(timeout));
}

std::optional<PeerEvent> Backend::next_event(milliseconds timeout) {
  Impl& i = *impl_;
  std::unique_lock<std::mutex> lock(i.ev_mu);
  if (!i.ev_cv.wait_for(lock, timeout, [&] { return !i.events.empty(); })) return std::nullopt;
  PeerEvent e = std::move(i.events.front());
  i.events.pop_front();
  return e;
}

const std::string& Backend::endpoint() const { return impl_->endpoint_text; }

std::string Backend::named() const { return "the job's etcd rendezvous (" + endpoint() + ")"; }

std::string Backend::lost_advice() const {
  return "check the cluster ('etcdctl endpoint status --cluster') and this host's network";
}

}  // namespace cc::rv::etcd
