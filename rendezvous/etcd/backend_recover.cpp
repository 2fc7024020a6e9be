// cc_comm_shrink and cc_comm_regrow on etcd, by the rules of cc's own server
// (rendezvous/server_core/recovery.cpp lists them), with etcd's leases
// standing in for the server's connections.
//
// Generation e+1 of join g is made under gen/<g>.<e+1>/ (keys.hpp):
// - Each survivor, on a connection of its own, puts its request as
//   member/<job rank> on that connection's lease, unless the generation
//   already has a result. A replacement for a failed rank (a Join of g after
//   its join completed) puts the same key, marked as a replacement.
// - A process of generation e is alive while its member key of e is on a
//   lease: a death deletes it (the lease expires or is revoked), a clean
//   leave moves it off its lease, an abort leaves it where it is.
// - One participant, the one whose transaction takes the coordinator key
//   (on its lease: when it dies, another takes over), reads generation e's
//   members and the requests, watches both, and decides once no living
//   member of e is awaited (and, for a regrow, every rank has a survivor or a
//   replacement): the result, with the members by new rank, the ranks of e
//   left out or replaced, the method and the NCCL id it made when one is
//   needed, goes in one transaction with the roster and latest/<g>.
// - Every participant gets the result from a watch; a member of it then
//   watches its ring neighbour and the events key as after a join, so a
//   failure in the new generation is told as any failure.
// - At a participant's deadline the generation gets a failed result naming
//   who did not call and which ranks never got a replacement; a survivor's
//   next call clears a failed attempt and starts again. A survivor whose
//   earlier call was decided (and failed afterwards, in NCCL) recovers from
//   the generation it was given.
// Costs: per participant, a lease, a few transactions of its own keys (its
// request batched by its node agent, when it has one) and one watch; the
// coordinator alone reads the O(n) member lists, once per generation.
#include <algorithm>
#include <thread>

#include "common/log.hpp"
#include "common/who.hpp"
#include "rendezvous/etcd/backend_impl.hpp"
#include "rendezvous/etcd/recovery_decision.hpp"
#include "rendezvous/rules/join_rules.hpp"
#include "rendezvous/rules/recovery_rules.hpp"

namespace cc::rv::etcd {

namespace {

constexpr milliseconds kRetry{100};         // waiting for a failed attempt to be cleared
constexpr milliseconds kGiveUpGrace{1500};  // past the deadline, to record why
constexpr milliseconds kSeatGrace{1000};    // past a lease's TTL, for etcd to expire it

using rules::kMaxRegrowRanks;
const auto call_name = rules::recover_call_name;
const auto call_words = rules::recover_call_words;
const auto where = rules::lineage_where;

std::optional<ResultRecord> result_of(const std::vector<KeyValue>& kvs) {
  ResultRecord r;
  if (kvs.empty() || !decode(kvs.front().value, &r)) return std::nullopt;
  return r;
}

}  // namespace

Status Backend::recover(const Recover& request, const MakeId& make_id, Joined* out) {
  return impl_->recover(request, make_id, out);
}

namespace {

// Applies one watched change to a snapshot: a member key of `from` or of
// the next generation, or the next generation's result.
void apply(const Keys& keys, Gen from, const WatchEvent& e, Snapshot* s) {
  const Gen next{from.g, from.generation + 1};
  s->revision = std::max(s->revision, e.kv.mod_revision);
  if (e.kv.key == keys.result(next)) {
    if (e.type == WatchEvent::Type::put) {
      s->next_result = result_of({e.kv});
      s->next_result_revision = e.kv.mod_revision;
    } else {
      s->next_result.reset();
    }
    return;
  }
  if (auto jr = keys.member_rank(from, e.kv.key)) {
    if (e.type == WatchEvent::Type::del)
      s->seats.erase(*jr);
    else
      s->seats.insert_or_assign(*jr, Held(e.kv));
    return;
  }
  if (from.generation > 0) {
    if (auto jr = keys.member_rank(Gen{from.g, from.generation - 1}, e.kv.key)) {
      if (e.type == WatchEvent::Type::del)
        s->parents.erase(*jr);
      else
        s->parents.insert_or_assign(*jr, Held(e.kv));
      return;
    }
  }
  if (auto jr = keys.member_rank(next, e.kv.key)) {
    MemberRecord m;
    if (e.type == WatchEvent::Type::del) {
      s->asks.erase(*jr);
      s->ask_order.erase(*jr);
    } else if (decode(e.kv.value, &m) && m.recovering) {
      s->asks[*jr] = std::move(m);
      s->ask_order[*jr] = e.kv.create_revision;
    }
  }
}

// What both reads below begin with: `from`'s result (the read's first
// answer) and the next generation's (its fourth), at the read's revision.
Snapshot results_read(const TxnResult& r) {
  Snapshot snap;
  snap.revision = r.revision;
  snap.from_result = result_of(r.responses.at(0).range.kvs);
  snap.next_result = result_of(r.responses.at(3).range.kvs);
  if (!r.responses.at(3).range.kvs.empty())
    snap.next_result_revision = r.responses.at(3).range.kvs.front().mod_revision;
  return snap;
}

// A recovery's state in one read: `from`'s result and member keys, the next
// generation's requests and result.
Status read_snapshot(EtcdClient& etcd, const Keys& keys, Gen from, Deadline deadline,
                     Snapshot* out) {
  const Gen next{from.g, from.generation + 1};
  Txn t;
  t.success = {Op::get(keys.result(from)), Op::get_prefix(keys.member_prefix(from)),
               Op::get_prefix(keys.member_prefix(next)), Op::get(keys.result(next))};
  TxnResult r;
  if (Status s = etcd.txn(t, deadline, &r); !s.ok()) return s;
  Snapshot snap = results_read(r);
  if (snap.from_result && snap.from_result->ok) {
    if (!snap.from_result->members.empty())
      snap.members = snap.from_result->members;
    else
      for (int32_t jr = 0; jr < snap.from_result->world_size; ++jr) snap.members.push_back(jr);
  }
  for (const KeyValue& kv : r.responses.at(1).range.kvs)
    if (auto jr = keys.member_rank(from, kv.key)) snap.seats.insert_or_assign(*jr, Held(kv));
  for (const KeyValue& kv : r.responses.at(2).range.kvs) {
    MemberRecord m;
    if (auto jr = keys.member_rank(next, kv.key); jr && decode(kv.value, &m) && m.recovering) {
      snap.asks[*jr] = std::move(m);
      snap.ask_order[*jr] = kv.create_revision;
    }
  }
  if (from.generation > 0) {  // the seats that left: their keys of the generation before
    const Gen before{from.g, from.generation - 1};
    Txn parents;
    for (const auto& [jr, seat] : snap.seats)
      if (seat.kv.lease == 0) parents.success.push_back(Op::get(keys.member(before, jr)));
    if (!parents.success.empty()) {
      TxnResult p;
      if (Status s = etcd.txn(parents, deadline, &p); !s.ok()) return s;
      for (const OpResult& o : p.responses)
        for (const KeyValue& kv : o.range.kvs)
          if (auto jr = keys.member_rank(before, kv.key))
            snap.parents.insert_or_assign(*jr, Held(kv));
    }
  }
  *out = std::move(snap);
  return Status::success();
}

// A caller's own part of a recovery's state, O(1) on etcd whatever the
// world's size: `from`'s result, the caller's member keys of `from` and of
// the next generation (and of the generation before, where it left `from`
// cleanly), the next generation's result. Enough for the rules' checks of
// this caller (rules::Recovery::check_caller looks at its own seat only);
// the coordinator alone reads every member (read_snapshot), so W callers
// cost etcd O(W) reads, not O(W^2).
Status read_own_snapshot(EtcdClient& etcd, const Keys& keys, Gen from, int32_t jr,
                         Deadline deadline, Snapshot* out) {
  const Gen next{from.g, from.generation + 1};
  Txn t;
  t.success = {Op::get(keys.result(from)), Op::get(keys.member(from, jr)),
               Op::get(keys.member(next, jr)), Op::get(keys.result(next))};
  TxnResult r;
  if (Status s = etcd.txn(t, deadline, &r); !s.ok()) return s;
  Snapshot snap = results_read(r);
  if (snap.from_result && snap.from_result->ok) {
    const auto& m = snap.from_result->members;
    const bool member = m.empty() ? jr >= 0 && jr < snap.from_result->world_size
                                  : std::find(m.begin(), m.end(), jr) != m.end();
    if (member) snap.members = {jr};
  }
  for (const KeyValue& kv : r.responses.at(1).range.kvs) snap.seats.insert_or_assign(jr, Held(kv));
  for (const KeyValue& kv : r.responses.at(2).range.kvs) {
    MemberRecord m;
    if (decode(kv.value, &m) && m.recovering) {
      snap.asks[jr] = std::move(m);
      snap.ask_order[jr] = kv.create_revision;
    }
  }
  if (auto seat = snap.seats.find(jr);
      from.generation > 0 && seat != snap.seats.end() && seat->second.kv.lease == 0) {
    std::optional<KeyValue> got;
    if (Status s =
            etcd.get(keys.member(Gen{from.g, from.generation - 1}, jr), deadline, &got, nullptr);
        !s.ok())
      return s;
    if (got) snap.parents.insert_or_assign(jr, Held(*got));
  }
  *out = std::move(snap);
  return Status::success();
}

}  // namespace

Status Backend::Impl::recover(const Recover& req, const MakeId& make_id, Joined* out) {
  const auto start = Clock::now();
  const Deadline deadline =
      req.timeout_ms == 0 ? after(opt.request_timeout) : start + milliseconds(req.timeout_ms);
  const std::string me_words = member_who(req.info);
  const std::string call = call_name(req.kind);
  Joining joining_now(*this, req.info);
  if (!joining_now.started())
    return make_status(CC_ERR_INVALID_USAGE, rules::own_connection_words(req.kind, req.info));
  if (Status s = ensure_lease(std::min(deadline, after(opt.request_timeout))); !s.ok()) return s;

  Gen from{req.info.comm_number, req.generation};
  const int32_t jr = req.info.rank;
  const std::string nonce = next_op_id();
  for (;;) {
    const Deadline requests = std::min(deadline, after(opt.request_timeout));
    if (Clock::now() >= deadline)
      return make_status(CC_ERR_TIMEOUT, call + " by " + me_words + " on " +
                                             where(opt.job_id, from.g, from.generation) +
                                             " did not complete within " +
                                             std::to_string(req.timeout_ms) + " ms");
    Snapshot snap;
    if (Status s = read_own_snapshot(*etcd, keys, from, jr, requests, &snap); !s.ok())
      return make_status(s.code, call + " by " + me_words + ": " + s.message);
    const Gen next{from.g, from.generation + 1};
    const std::string at = where(opt.job_id, from.g, from.generation);
    if (!snap.from_result || !snap.from_result->ok)
      return make_status(CC_ERR_INVALID_USAGE,
                         call + " by " + me_words + ": " + at +
                             " never completed on this etcd rendezvous, so it has nothing to "
                             "recover; check MASTER_ADDR and the job id");
    Tracker tracker(opt.job_id, from);
    tracker.load(snap);
    const rules::Recovery& rules = tracker.rules();
    // An earlier call of this process was decided: recover from what it got.
    auto mine = snap.asks.find(jr);
    const bool asked_before = mine != snap.asks.end() && same_process(mine->second.info, req.info);
    if (snap.next_result && snap.next_result->ok) {
      const auto& m = snap.next_result->members;
      if (asked_before && std::find(m.begin(), m.end(), jr) != m.end()) {
        from = next;
        continue;
      }
      return make_status(CC_ERR_MISMATCH,
                         me_words + " cannot take part in the next generation of " + at +
                             ": generation " + std::to_string(next.generation) +
                             " was made without it (it called after the others had decided, or "
                             "was thought gone); stop it, and start a replacement with RANK=" +
                             std::to_string(jr) + " for the survivors' next cc_comm_regrow");
    }
    if (snap.next_result) {  // a failed attempt: cleared, then tried again
      Txn t;
      t.compare = {Compare::mod_revision_is(keys.result(next), snap.next_result_revision)};
      t.success = {Op::del_prefix(keys.generation(next))};
      TxnResult r;
      if (Status s = etcd->txn(t, requests, &r); !s.ok())
        return make_status(s.code, call + " by " + me_words + ": " + s.message);
      continue;
    }
    // Only a member of `from` that is not dead takes part (one that left
    // cleanly may: it is not waited for), with a size a job can have.
    if (auto refused = rules.check_caller(req.info, req.kind, req.nranks))
      return make_status(refused->code, refused->words);
    // The request, on this connection's lease.
    const int64_t my_lease = current_lease();
    MemberRecord ask{req.info, nonce, {}};
    ask.recovering = true;
    ask.kind = req.kind;
    ask.nranks = req.kind == RecoverKind::regrow ? req.nranks : 0;
    ask.can_shrink = req.can_shrink;
    if (!asked_before) {
      Txn t;
      t.compare = {Compare::absent(keys.member(next, jr)), Compare::absent(keys.result(next))};
      t.success = {Op::put(keys.member(next, jr), encode(ask), my_lease)};
      t.failure = {Op::get(keys.member(next, jr))};
      TxnResult r;
      // Behind a node agent, batched with the node's other ranks' requests.
      if (Status s = claim_txn(t, requests, &r); !s.ok())
        return make_status(s.code, call + " by " + me_words + ": " + s.message);
      if (!r.succeeded) {
        MemberRecord held;
        const auto& kvs = r.responses.at(0).range.kvs;
        if (!kvs.empty() && decode(kvs.front().value, &held) && held.nonce != nonce &&
            !same_process(held.info, req.info))
          return make_status(CC_ERR_MISMATCH, member_who(held.info) + " already asked for rank " +
                                                  std::to_string(jr) + " in " + at + "; " +
                                                  me_words + " holds it: stop the other process");
        continue;  // the result came first: read it
      }
      log().info("etcd: {}: {} called {}", at, rules.seat_who(jr),
                 call_words(req.kind, req.nranks));
    } else if (mine->second.kind != req.kind ||
               (req.kind == RecoverKind::regrow && mine->second.nranks != req.nranks)) {
      return make_status(CC_ERR_INVALID_USAGE,
                         rules.seat_who(jr) + " called " + call_words(req.kind, req.nranks) +
                             " on " + at + " while its earlier call (" +
                             call_words(mine->second.kind, mine->second.nranks) +
                             ") is still in progress; call it once at a time");
    }
    // Coordinate, or wait for the coordinator's result.
    std::optional<ResultRecord> result;
    Status waited = wait_for_recovery(from, req, make_id, deadline, &result);
    if (!waited.ok()) return waited;
    if (!result) continue;  // a failed attempt was cleared meanwhile
    if (!result->ok) return make_status(static_cast<cc_result_t>(result->code), result->words);
    const auto& m = result->members;
    if (std::find(m.begin(), m.end(), jr) == m.end()) continue;  // read again: left out
    return finish_recovery(next, req.info, *result, out);
  }
}

// Takes the coordinator key when nobody holds it, and coordinates; else
// waits for the result, taking over when the coordinator goes.
Status Backend::Impl::wait_for_recovery(Gen from, const Recover& req, const MakeId& make_id,
                                        Deadline deadline, std::optional<ResultRecord>* out) {
  const Gen next{from.g, from.generation + 1};
  const std::string me_words = member_who(req.info);
  for (;;) {
    if (Clock::now() >= deadline) return give_up_recovery(from, req.timeout_ms, out);
    const Deadline requests = std::min(deadline, after(opt.request_timeout));
    const int64_t my_lease = current_lease();
    Txn t;
    t.compare = {Compare::absent(keys.coordinator(next))};
    t.success = {Op::put(keys.coordinator(next), me_words, my_lease)};
    t.failure = {Op::get(keys.coordinator(next))};
    TxnResult r;
    if (Status s = etcd->txn(t, requests, &r); !s.ok())
      return make_status(s.code,
                         call_name(req.kind) + std::string(" by ") + me_words + ": " + s.message);
    const auto& held = r.succeeded ? std::vector<KeyValue>{} : r.responses.at(0).range.kvs;
    const bool coordinating =
        r.succeeded || (!held.empty() && held.front().lease == my_lease && my_lease != 0);
    if (coordinating) {
      if (Status s = coordinate_recovery(from, req, make_id, deadline); !s.ok()) return s;
    }
    ResultWait w = ResultWait::deadline;
    if (Status s = await_result(next, deadline, true, &w, out); !s.ok())
      return make_status(s.code,
                         call_name(req.kind) + std::string(" by ") + me_words + ": " + s.message);
    if (w == ResultWait::result || w == ResultWait::cleared) return Status::success();
    // The coordinator went (or the deadline passed): loop.
  }
}

// Waits for the next generation's result, or for its coordinator to go, or
// (a replacement's `refused_key`, when not empty) for its own refusal.
Status Backend::Impl::await_result(Gen next, Deadline deadline, bool follow_coordinator,
                                   ResultWait* how, std::optional<ResultRecord>* out,
                                   const std::string& refused_key) {
  out->reset();
  *how = ResultWait::deadline;
  if (Clock::now() >= deadline) return Status::success();
  Txn t;
  t.success = {Op::get(keys.result(next)), Op::get(keys.coordinator(next))};
  if (!refused_key.empty()) t.success.push_back(Op::get(refused_key));
  TxnResult r;
  if (Status s = etcd->txn(t, std::min(deadline, after(opt.request_timeout)), &r); !s.ok())
    return s;
  if (!refused_key.empty() && (*out = result_of(r.responses.at(2).range.kvs))) {
    *how = ResultWait::refused;
    return Status::success();
  }
  if ((*out = result_of(r.responses.at(0).range.kvs))) {
    *how = ResultWait::result;
    return Status::success();
  }
  if (follow_coordinator && r.responses.at(1).range.kvs.empty()) {
    *how = ResultWait::coordinator_gone;
    return Status::success();
  }
  auto spec = [&](const std::string& key) {
    WatchSpec w;
    w.key = key;
    w.start_revision = r.revision + 1;
    return w;
  };
  std::vector<WatchSpec> specs = {spec(keys.result(next))};
  size_t coordinator_spec = 0, refused_spec = 0;  // 0: not watched
  if (follow_coordinator) {
    coordinator_spec = specs.size();
    specs.push_back(spec(keys.coordinator(next)));
    specs.back().no_put = true;
  }
  if (!refused_key.empty()) {
    refused_spec = specs.size();
    specs.push_back(spec(refused_key));
    specs.back().no_delete = true;
  }
  *how = ResultWait::deadline;
  Status s =
      etcd->watch(specs, deadline, nullptr, [&](const std::vector<WatchEvent>& evs, int64_t) {
        for (const WatchEvent& e : evs) {
          if (coordinator_spec != 0 && e.spec == coordinator_spec) {
            *how = ResultWait::coordinator_gone;
            return false;
          }
          if (refused_spec != 0 && e.spec == refused_spec) {
            if ((*out = result_of({e.kv}))) {
              *how = ResultWait::refused;
              return false;
            }
            continue;
          }
          if (e.type == WatchEvent::Type::del) {
            *how = ResultWait::cleared;
            return false;
          }
          if ((*out = result_of({e.kv}))) {
            *how = ResultWait::result;
            return false;
          }
        }
        return true;
      });
  if (s.code == CC_ERR_TIMEOUT) return Status::success();
  return s;
}

// The coordinator's part: watches the members of `from` and the requests,
// feeding each change to the recovery rules, until the decision can be made
// (or must be refused), then puts it. A replacement the rules refuse once
// the regrow is ready (another world size) is told on its own key, and the
// watch goes on.
Status Backend::Impl::coordinate_recovery(Gen from, const Recover& req, const MakeId& make_id,
                                          Deadline deadline) {
  const Gen next{from.g, from.generation + 1};
  const std::string me_words = member_who(req.info);
  Snapshot snap;
  Tracker tracker(opt.job_id, from);
  auto failed = [&](const Status& s) {
    return make_status(s.code,
                       me_words + " coordinating " + call_name(req.kind) + ": " + s.message);
  };
  for (bool refused_some = true; refused_some;) {
    refused_some = false;
    // Read, then watch until settled; read again when a seat leaves (its key
    // of the generation before is then watched too).
    for (bool again = true; again;) {
      if (Status s = read_snapshot(*etcd, keys, from,
                                   std::min(deadline, after(opt.request_timeout)), &snap);
          !s.ok())
        return failed(s);
      tracker.load(snap);
      if (tracker.settled(snap)) break;
      auto spec = [&](const std::string& key, bool prefix) {
        WatchSpec w;
        w.key = key;
        if (prefix) w.range_end = prefix_end(key);
        w.start_revision = snap.revision + 1;
        return w;
      };
      std::vector<WatchSpec> specs = {spec(keys.member_prefix(from), true),
                                      spec(keys.member_prefix(next), true),
                                      spec(keys.result(next), false)};
      for (const auto& [jr, parent] : snap.parents) specs.push_back(spec(parent.kv.key, false));
      again = false;
      Status s =
          etcd->watch(specs, deadline, nullptr, [&](const std::vector<WatchEvent>& evs, int64_t) {
            for (const WatchEvent& e : evs) {
              apply(keys, from, e, &snap);
              tracker.on_event(keys, snap, e);
              again = again || (e.spec == 0 && e.type == WatchEvent::Type::put && e.kv.lease == 0);
            }
            return !again && !tracker.settled(snap);
          });
      if (s.code == CC_ERR_TIMEOUT) return Status::success();  // the caller gives up in words
      if (!s.ok()) return failed(s);
    }
    if (snap.next_result || tracker.refusal()) break;
    for (const auto& [info, refusal] : tracker.take_wrong_replacements()) {
      if (Status s = refuse_replacement(next, snap, info.rank, refusal,
                                        std::min(deadline, after(opt.request_timeout)));
          !s.ok())
        return failed(s);
      refused_some = true;
    }
  }
  if (snap.next_result) return Status::success();
  const Deadline requests = std::min(deadline, after(opt.request_timeout));
  if (const auto& refused = tracker.refusal()) {
    (void)fail_generation(next, refused->code, refused->words, requests);
    return Status::success();
  }
  bool need_id = false;
  RosterRecord roster;
  ResultRecord done = tracker.decide(&need_id, &roster);
  done.checked_revision = snap.revision;
  if (need_id) {
    if (Status s = make_id(&done.unique_id); !s.ok()) {
      (void)fail_generation(next, s.code,
                            me_words + " could not make the NCCL id of generation " +
                                std::to_string(next.generation) + ": " + s.message,
                            requests);
      return Status::success();
    }
  }
  Txn t;
  t.compare = {Compare::absent(keys.result(next))};
  t.success = {Op::put(keys.roster(next), encode(roster)), Op::put(keys.result(next), encode(done)),
               Op::put(keys.latest(from.g), std::to_string(next.generation))};
  TxnResult r;
  if (Status s = etcd->txn(t, requests, &r); !s.ok())
    return make_status(s.code, me_words + " completing " + call_name(req.kind) + ": " + s.message);
  if (r.succeeded)
    log().info("etcd: {}: {} ranks, from generation {} (ranks left out or replaced: {}), by {}",
               where(opt.job_id, next.g, next.generation), done.world_size, from.generation,
               done.failed.empty() ? std::string("none") : rank_ranges(done.failed),
               need_id ? "a new NCCL id" : "ncclCommShrink");
  return Status::success();
}

// Takes a waiting replacement's request out (unless it changed meanwhile)
// and puts its refusal where it watches (keys.hpp: refused/<its op id>).
Status Backend::Impl::refuse_replacement(Gen next, const Snapshot& snap, int32_t rank,
                                         const rules::Refusal& refusal, Deadline deadline) {
  auto ask = snap.asks.find(rank);
  auto created = snap.ask_order.find(rank);
  if (ask == snap.asks.end() || created == snap.ask_order.end()) return Status::success();
  ResultRecord words;
  words.ok = false;
  words.code = static_cast<uint32_t>(refusal.code);
  words.words = refusal.words;
  Compare same_request;
  same_request.key = keys.member(next, rank);
  same_request.target = Compare::Target::create;
  same_request.number = created->second;
  Txn t;
  t.compare = {same_request};
  t.success = {Op::del(keys.member(next, rank)),
               Op::put(keys.refused(next, ask->second.nonce), encode(words))};
  TxnResult r;
  if (Status s = etcd->txn(t, deadline, &r); !s.ok()) return s;
  log().warn("etcd: {}: {}", where(opt.job_id, next.g, next.generation - 1), refusal.words);
  return Status::success();
}

// A participant's deadline passed: the next generation fails with words
// naming who did not call, unless it was decided meanwhile; *out is the
// result that stands.
Status Backend::Impl::give_up_recovery(Gen from, uint32_t timeout_ms,
                                       std::optional<ResultRecord>* out) {
  const Gen next{from.g, from.generation + 1};
  const Deadline grace = after(kGiveUpGrace);
  Snapshot snap;
  if (Status s = read_snapshot(*etcd, keys, from, grace, &snap); !s.ok()) return s;
  if (!snap.next_result) {
    Tracker tracker(opt.job_id, from);
    tracker.load(snap);
    (void)fail_generation(next, CC_ERR_TIMEOUT, tracker.late_words(timeout_ms), grace);
    if (Status s = read_snapshot(*etcd, keys, from, grace, &snap); !s.ok()) return s;
  }
  *out = snap.next_result;
  if (!*out)
    return make_status(CC_ERR_TIMEOUT,
                       "the recovery of " + where(opt.job_id, from.g, from.generation) +
                           " did not complete within " + std::to_string(timeout_ms) + " ms");
  return Status::success();
}

// This process is a member of the generation `next` decided: its rank, and
// the watch of its ring neighbour and of the events from the result on.
Status Backend::Impl::finish_recovery(Gen next, const MemberInfo& info, const ResultRecord& result,
                                      Joined* out) {
  const auto& m = result.members;
  const auto at = std::find(m.begin(), m.end(), info.rank);
  if (at == m.end())
    return make_status(CC_ERR_INTERNAL, member_who(info) + " is not a member of " +
                                            where(opt.job_id, next.g, next.generation));
  const int32_t pos = static_cast<int32_t>(at - m.begin());
  {
    std::lock_guard<std::mutex> lock(mu);
    member = true;
    leaving = false;
    comm_number = next.g;
    generation = next.generation;
    me = info;
    position = pos;
    ring = m;
    world = result.world_size;
    members.clear();
  }
  tell_agent_member();
  start_follower(Followed{next, pos, result.world_size, m}, result.checked_revision + 1, result);
  if (out != nullptr) {
    out->unique_id = result.unique_id;
    out->members.clear();
    for (int32_t jr : m) out->members.push_back({jr, std::string(), 0});
    out->notice.clear();
    out->generation = next.generation;
    out->rank = pos;
    out->failed.assign(result.failed.begin(), result.failed.end());
    out->method = static_cast<RecoverMethod>(result.method);
    out->world_size = static_cast<uint32_t>(m.size());
  }
  log().info("etcd: {}: {} is rank {} of {}", where(opt.job_id, next.g, next.generation),
             member_who(info), pos, result.world_size);
  return Status::success();
}

// A Join of a communicator whose join completed: a replacement for a failed
// rank, which waits (until its deadline) for a regrow to take it.
Status Backend::Impl::join_as_replacement(const Join& req, Joined* out) {
  const Deadline deadline = within(req.timeout_ms);
  const MemberInfo& in = req.info;
  const int32_t jr = in.rank;
  const uint32_t g = in.comm_number;
  const std::string me_words = member_who(in);
  const std::string late = rules::late_join_words(in, rules::communicator_where(opt.job_id, g));
  const std::string nonce = next_op_id();
  std::optional<Gen> asked;           // where this process's request stands
  std::optional<Deadline> seat_wait;  // until when a live holder of the rank may still die
  auto withdraw = [&] {
    if (!asked) return;
    // Only our own request goes: its value carries our nonce.
    std::optional<KeyValue> kv;
    const Gen next{asked->g, asked->generation + 1};
    if (etcd->get(keys.member(next, jr), after(opt.request_timeout), &kv, nullptr).ok() && kv) {
      MemberRecord held;
      if (decode(kv->value, &held) && held.nonce == nonce) {
        Txn del;
        del.compare = {Compare::mod_revision_is(keys.member(next, jr), kv->mod_revision)};
        del.success = {Op::del(keys.member(next, jr))};
        TxnResult r;
        (void)etcd->txn(del, after(opt.request_timeout), &r);
      }
    }
    asked.reset();
  };
  uint32_t generation_seen = 0;  // the communicator's latest generation, as last read
  for (;;) {
    if (Clock::now() >= deadline) {
      withdraw();
      return make_status(
          CC_ERR_TIMEOUT,
          rules::replacement_late_words(jr, req.timeout_ms, where(opt.job_id, g, generation_seen)));
    }
    const Deadline requests = std::min(deadline, after(opt.request_timeout));
    std::optional<KeyValue> latest;
    if (Status s = etcd->get(keys.latest(g), requests, &latest, nullptr); !s.ok())
      return make_status(s.code, me_words + ": " + s.message);
    uint32_t e = 0;
    if (latest) e = static_cast<uint32_t>(std::strtoul(latest->value.c_str(), nullptr, 10));
    generation_seen = e;
    const Gen from{g, e};
    const Gen next{g, e + 1};
    Snapshot snap;
    if (Status s = read_snapshot(*etcd, keys, from, requests, &snap); !s.ok())
      return make_status(s.code, me_words + ": " + s.message);
    Tracker tracker(opt.job_id, from);
    tracker.load(snap);
    const rules::Recovery& rules = tracker.rules();
    const std::string at = where(opt.job_id, g, e);
    if (rules.has_seat(jr) && rules.state(jr) == rules::SeatState::alive) {
      // etcd learns of a death when its lease expires: a replacement started
      // at once (cc-run --max-restarts) waits that long for the rank it
      // replaces to be declared failed before it counts as a second start.
      if (!seat_wait) {
        int64_t ttl_s = 0;
        {
          std::lock_guard<std::mutex> lock(mu);
          ttl_s = lease_ttl;
        }
        seat_wait = std::min(deadline, Clock::now() + std::chrono::seconds(ttl_s) + kSeatGrace);
      }
      if (Clock::now() < *seat_wait) {
        std::this_thread::sleep_for(kRetry);
        continue;
      }
      return make_status(CC_ERR_MISMATCH,
                         rules::alive_rank_words(late, jr, at, rules.seat_who(jr)));
    }
    if (snap.next_result) {  // decided (latest moves on) or failed (a survivor clears it)
      std::this_thread::sleep_for(kRetry);
      continue;
    }
    auto mine = snap.asks.find(jr);
    if (mine != snap.asks.end() && mine->second.nonce != nonce)
      return make_status(CC_ERR_MISMATCH,
                         rules::replacement_waiting_words(late, jr, mine->second.info));
    if (mine == snap.asks.end()) {
      // Its rank is free and nobody waits for it: what else the rules
      // check of a replacement (its NCCL).
      if (auto refused = rules.check_replacement(in, late))
        return make_status(refused->code, refused->words);
      const int64_t my_lease = current_lease();
      MemberRecord ask{in, nonce, {}};
      ask.recovering = true;
      ask.kind = RecoverKind::regrow;
      ask.nranks = in.world_size;
      ask.replacement = true;
      Txn t;
      t.compare = {Compare::absent(keys.member(next, jr)), Compare::absent(keys.result(next))};
      t.success = {Op::put(keys.member(next, jr), encode(ask), my_lease)};
      TxnResult r;
      if (Status s = etcd->txn(t, requests, &r); !s.ok())
        return make_status(s.code, me_words + ": " + s.message);
      if (!r.succeeded) continue;
      asked = from;
      log().info("etcd: {}: {} waits as a replacement for rank {}", at, me_words, jr);
    }
    std::optional<ResultRecord> result;
    ResultWait how = ResultWait::deadline;
    // The coordinator key comes and goes with the survivors: only the result counts here.
    if (Status s = await_result(next, deadline, false, &how, &result, keys.refused(next, nonce));
        !s.ok())
      return make_status(s.code, me_words + ": " + s.message);
    if (how == ResultWait::refused) {
      asked.reset();  // the coordinator took its request out
      return make_status(static_cast<cc_result_t>(result->code), result->words);
    }
    if (!result || !result->ok) continue;  // the deadline, or a failed regrow: as above
    const auto& m = result->members;
    if (std::find(m.begin(), m.end(), jr) != m.end()) {
      Status s = finish_recovery(next, in, *result, out);
      if (s.ok())
        log().info("etcd: {}: {} replaces rank {}", where(opt.job_id, g, next.generation), me_words,
                   jr);
      return s;
    }
    withdraw();  // a shrink left it out: wait for the next regrow
  }
}

}  // namespace cc::rv::etcd
