// A rank's join on etcd (see backend.hpp for the whole story): one
// transaction per rank claims its member key; rank 0 watches the member keys
// arrive, checks each by the join rules (rendezvous/rules/join_rules.hpp, as
// cc's server does), and puts the result once all are there; every rank gets
// the result from its generation watch.
#include <algorithm>
#include <map>

#include "common/log.hpp"
#include "rendezvous/etcd/backend_impl.hpp"
#include "rendezvous/rules/join_rules.hpp"

namespace cc::rv::etcd {

namespace {

constexpr milliseconds kClosingGrace{1500};  // past the deadline, to name the missing ranks

using rules::Refusal;
const auto where_of = rules::communicator_where;

// The members of a joining generation as rank 0 sees them arrive, each
// checked by the join rules, as cc's server checks a join; with their
// records, for the roster; the NCCL ids they brought, as the rules hand
// them out.
class Arrivals {
 public:
  explicit Arrivals(std::string where) : where_(std::move(where)) {}

  std::optional<Refusal> arrive(const MemberRecord& m) {
    if (auto refused = check_.arrive(m.info, where_, m.unique_id)) return refused;
    present_[m.info.rank] = m;
    return std::nullopt;
  }

  // A member key went while the generation joined (its lease expired).
  void leave(int32_t rank) {
    check_.leave(rank);
    present_.erase(rank);
  }

  int32_t world() const { return check_.world(); }
  bool complete() const { return check_.complete(); }
  int32_t joined() const { return check_.joined(); }
  std::vector<int32_t> missing() const { return check_.missing(); }
  const std::map<int32_t, MemberRecord>& present() const { return present_; }
  std::vector<uint8_t> unique_ids() const { return check_.unique_ids(); }

 private:
  std::string where_;
  rules::JoinCheck check_;
  std::map<int32_t, MemberRecord> present_;
};

// etcd's part of the words of a join that did not complete.
rules::Reach etcd_reach(const std::string& endpoints) {
  return {"MASTER_ADDR (the etcd endpoints " + endpoints + ") and job id", "etcd"};
}

}  // namespace

Status Backend::join(const Join& request, Joined* out) { return impl_->join(request, out); }

Status Backend::Impl::join(const Join& req, Joined* out) {
  const Deadline deadline = within(req.timeout_ms);
  const MemberInfo& in = req.info;
  const uint32_t g = in.comm_number;
  const std::string where = where_of(opt.job_id, g);
  const std::string me = member_who(in);
  uint32_t busy_with = 0;
  Joining joining_now(*this, in, &busy_with);
  if (!joining_now.started())
    return make_status(CC_ERR_INVALID_USAGE,
                       me + ": this etcd rendezvous connection already joined communicator " +
                           std::to_string(busy_with) + " of job " + quote(opt.job_id) +
                           "; use one connection per communicator");

  const Deadline requests = std::min(deadline, after(opt.request_timeout));
  if (Status s = ensure_lease(requests); !s.ok()) return s;
  int64_t my_lease = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    my_lease = lease;
  }
  struct StopUnlessJoined {
    Impl& i;
    ~StopUnlessJoined() {
      bool joined = false;
      {
        std::lock_guard<std::mutex> lock(i.mu);
        joined = i.member;
      }
      if (!joined) i.stop_follower();
    }
  } stop_unless_joined{*this};

  // One transaction: claim the rank, unless it is taken or the generation
  // has ended. Rank 0 also reads who came before it.
  const std::string nonce = next_op_id();
  MemberRecord rec{in, nonce, req.unique_id};
  {
    std::lock_guard<std::mutex> lock(mu);
    rec.node = node_words;
  }
  TxnResult r;
  for (;;) {
    my_lease = current_lease();
    Txn t;
    t.compare = {Compare::absent(keys.member(g, in.rank)), Compare::absent(keys.result(g))};
    t.success = {Op::put(keys.member(g, in.rank), encode(rec), my_lease)};
    if (in.rank == 0) t.success.push_back(Op::get_prefix(keys.member_prefix(g)));
    t.failure = {Op::get(keys.member(g, in.rank)), Op::get(keys.result(g))};
    Status s = claim_txn(t, requests, &r);
    if (s.ok()) break;
    // Its lease expired before the claim (keepalives did not get through a
    // busy etcd in time): take a new one and claim again.
    if (s.message.find("lease not found") != std::string::npos && Clock::now() < requests) {
      if (Status renewed = renew_lease(my_lease, requests); !renewed.ok())
        s = renewed;
      else
        continue;
    }
    return make_status(s.code, me + ": joining " + where + ": " + s.message);
  }

  bool ours = r.succeeded;
  if (!r.succeeded) {
    const auto& held = r.responses.at(0).range.kvs;
    MemberRecord holder;
    // Our own claim, sent twice (an answer was lost): the first went through.
    ours = !held.empty() && decode(held.front().value, &holder) && holder.nonce == nonce;
    if (const auto& done = r.responses.at(1).range.kvs; !done.empty() && !ours) {
      ResultRecord res;
      // A replacement for a failed rank waits for the survivors' regrow.
      if (decode(done.front().value, &res) && res.ok) {
        // Not a member of generation g after all: what its watch heard
        // there (the survivors' aborts) is no news of the generation it
        // joins, and must not fail that one's init.
        stop_follower();
        drop_events();
        return join_as_replacement(req, out);
      }
      return make_status(CC_ERR_MISMATCH,
                         rules::already_failed_words(where, res.ok ? std::string() : res.words));
    }
    if (!ours)
      return fail_generation(g, CC_ERR_MISMATCH, rules::claimed_twice_words(holder.info, in, where),
                             requests);
  }
  // The generation's watch starts from the claim: what this rank waits for
  // (the result, a departure, its neighbour's key going) comes after it, and
  // a watch that starts near etcd's present revision costs etcd no catch-up
  // through the other ranks' claims.
  const int64_t claimed =
      r.succeeded ? r.revision : r.responses.at(0).range.kvs.front().mod_revision;
  start_follower(Followed{Gen(g), in.rank, in.world_size, {}}, claimed + 1);
  if (in.rank < 0 || in.rank >= in.world_size)
    return fail_generation(g, CC_ERR_INVALID_ARGUMENT,
                           rules::out_of_range_words(in, in.world_size, where), requests);

  if (in.rank == 0) {
    std::vector<KeyValue> before;
    int64_t revision = r.revision;
    if (r.succeeded) {
      before = r.responses.at(1).range.kvs;
    } else {  // our claim went through earlier: read them now
      RangeResult all;
      if (Status s =
              etcd->range(keys.member_prefix(g), prefix_end(keys.member_prefix(g)), requests, &all);
          !s.ok())
        return make_status(s.code, me + ": joining " + where + ": " + s.message);
      before = std::move(all.kvs);
      revision = all.revision;
    }
    if (Status s = coordinate(g, std::move(before), revision, deadline, req, rec); !s.ok())
      return s;
  }
  log().debug("etcd: {}: {} claimed its rank", where, me);
  for (;;) {
    if (auto result = wait_result(deadline)) return finish_join(g, in, *result, out);
    if (!take_lease_lost()) return join_timed_out(g, req, out);
    // The lease expired while the others were coming: claim again on a new one.
    if (Status s = reclaim(g, rec, std::min(deadline, after(opt.request_timeout))); !s.ok())
      return make_status(
          s.code, me + ": joining " + where + " again after its lease expired: " + s.message);
  }
}

// A new lease in place of `old` (expired, or about to be given up).
Status Backend::Impl::renew_lease(int64_t old, Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (lease == old) lease = 0;
    lease_lost = false;
  }
  return ensure_lease(deadline);
}

// True once when the keepalive thread found the lease gone while joining.
bool Backend::Impl::take_lease_lost() {
  std::lock_guard<std::mutex> lock(mu);
  const bool lost = lease_lost;
  lease_lost = false;
  return lost;
}

// Claims the rank again on a new lease, after the old one expired (its
// member key went with it). A generation that ended meanwhile is told by the
// watch.
Status Backend::Impl::reclaim(uint32_t g, const MemberRecord& rec, Deadline deadline) {
  const int64_t old = current_lease();
  if (Status s = renew_lease(old, deadline); !s.ok()) return s;
  const int64_t fresh = current_lease();
  Txn t;
  t.compare = {Compare::absent(keys.member(g, rec.info.rank)), Compare::absent(keys.result(g))};
  t.success = {Op::put(keys.member(g, rec.info.rank), encode(rec), fresh)};
  TxnResult r;
  log().info("etcd: {}: {} claims its rank again: its lease expired while joining",
             where_of(opt.job_id, g), member_who(rec.info));
  return etcd->txn(t, deadline, &r);
}

// Rank 0's part: the members that came before it, then each arrival from a
// watch, checked in the order they came; the result once all are there.
Status Backend::Impl::coordinate(uint32_t g, std::vector<KeyValue> before, int64_t revision,
                                 Deadline deadline, const Join& req, const MemberRecord& self) {
  const std::string where = where_of(opt.job_id, g);
  Arrivals arrivals(where);
  std::optional<Refusal> refused;
  std::sort(before.begin(), before.end(), [](const KeyValue& a, const KeyValue& b) {
    return a.create_revision < b.create_revision;
  });
  for (const KeyValue& kv : before) {
    MemberRecord m;
    if (decode(kv.value, &m) && !refused) refused = arrivals.arrive(m);
  }
  int64_t checked = revision;
  bool result_seen = false;
  if (!refused && !arrivals.complete()) {
    WatchSpec members;
    members.key = keys.member_prefix(g);
    members.range_end = prefix_end(members.key);
    members.start_revision = revision + 1;
    WatchSpec result;
    result.key = keys.result(g);
    result.start_revision = revision + 1;
    result.no_delete = true;
    Status s = etcd->watch(
        {members, result}, deadline, nullptr, [&](const std::vector<WatchEvent>& evs, int64_t) {
          for (const WatchEvent& e : evs) {
            if (e.spec == 1) {  // another rank ended the generation (a failure)
              result_seen = true;
              return false;
            }
            checked = std::max(checked, e.kv.mod_revision);
            const auto rank = keys.member_rank(g, e.kv.key);
            if (!rank) continue;
            if (e.type == WatchEvent::Type::del) {
              arrivals.leave(*rank);
              if (*rank == 0 &&
                  reclaim(g, self, std::min(deadline, after(opt.request_timeout))).ok())
                (void)take_lease_lost();  // rank 0's own lease expired: claimed again
              continue;
            }
            MemberRecord m;
            if (e.kv.create_revision != e.kv.mod_revision || !decode(e.kv.value, &m)) continue;
            refused = arrivals.arrive(m);
            if (refused) return false;
          }
          return !arrivals.complete();
        });
    if (result_seen) return Status::success();
    if (s.code == CC_ERR_TIMEOUT) {
      return fail_generation(
          g, CC_ERR_TIMEOUT,
          rules::never_joined_words(arrivals.missing(), arrivals.world(), arrivals.joined(), where,
                                    req.timeout_ms, etcd_reach(etcd->address().endpoint_list())),
          after(kClosingGrace));
    }
    if (!s.ok())
      return make_status(s.code, member_who(req.info) + ": waiting for the other ranks of " +
                                     where + ": " + s.message);
  }
  const Deadline requests = std::min(deadline, after(opt.request_timeout));
  if (refused) return fail_generation(g, refused->code, refused->words, requests);

  ResultRecord done;
  done.ok = true;
  done.world_size = arrivals.world();
  done.checked_revision = checked;
  RosterRecord roster;
  for (const auto& [rank, m] : arrivals.present())
    roster.members.push_back({rank, m.info.host, m.info.pid});
  done.unique_id = arrivals.unique_ids();
  Txn t;
  t.compare = {Compare::absent(keys.result(g))};
  t.success = {Op::put(keys.roster(g), encode(roster)), Op::put(keys.result(g), encode(done))};
  TxnResult r;
  if (Status s = etcd->txn(t, requests, &r); !s.ok())
    return make_status(s.code, member_who(req.info) + ": completing " + where + ": " + s.message);
  if (r.succeeded) log().info("etcd: {}: all {} ranks joined", where, done.world_size);
  return Status::success();
}

std::optional<ResultRecord> Backend::Impl::wait_result(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu);
  result_cv.wait_until(lock, deadline, [&] { return join_result.has_value() || lease_lost; });
  return join_result;
}

// Puts the generation's failure unless it already has a result; returns the
// result that stands (so every rank reports the first failure).
Status Backend::Impl::fail_generation(Gen g, cc_result_t code, const std::string& words,
                                      Deadline deadline) {
  ResultRecord failed;
  failed.ok = false;
  failed.code = static_cast<uint32_t>(code);
  failed.words = words;
  Txn t;
  t.compare = {Compare::absent(keys.result(g))};
  t.success = {Op::put(keys.result(g), encode(failed))};
  t.failure = {Op::get(keys.result(g))};
  TxnResult r;
  if (Status s = etcd->txn(t, deadline, &r); !s.ok()) {
    log().warn("etcd: could not record the failure of {}: {}", where_of(opt.job_id, g.g),
               s.message);
    return make_status(code, words);
  }
  if (!r.succeeded && !r.responses.at(0).range.kvs.empty()) {
    ResultRecord standing;
    if (decode(r.responses[0].range.kvs.front().value, &standing)) {
      if (standing.ok)
        return make_status(CC_ERR_MISMATCH,
                           where_of(opt.job_id, g.g) + " completed without this rank: " + words);
      return make_status(static_cast<cc_result_t>(standing.code), standing.words);
    }
  }
  log().warn("etcd: {} failed: {}", where_of(opt.job_id, g.g), words);
  return make_status(code, words);
}

// The join deadline passed without a result: the first rank here (once per
// generation) reads which member keys exist and names the ranks that never
// came; the others take its words.
Status Backend::Impl::join_timed_out(uint32_t g, const Join& req, Joined* out) {
  const std::string where = where_of(opt.job_id, g);
  const Deadline grace = after(kClosingGrace);
  Txn t;
  t.compare = {Compare::absent(keys.closing(g))};
  t.success = {Op::put(keys.closing(g), member_who(req.info))};
  TxnResult r;
  Status s = etcd->txn(t, grace, &r);
  if (s.ok() && r.succeeded) {
    const int32_t world = req.info.world_size;
    RangeResult present;
    s = etcd->range(keys.member_prefix(g), prefix_end(keys.member_prefix(g)), grace, &present,
                    true);
    if (s.ok()) {
      std::vector<int32_t> came;
      for (const KeyValue& kv : present.kvs)
        if (auto rank = keys.member_rank(g, kv.key)) came.push_back(*rank);
      const std::vector<int32_t> missing = rules::absent_ranks(world, came);
      return fail_generation(
          g, CC_ERR_TIMEOUT,
          rules::never_joined_words(missing, world, world - static_cast<int32_t>(missing.size()),
                                    where, req.timeout_ms,
                                    etcd_reach(etcd->address().endpoint_list())),
          grace);
    }
  }
  // Another rank names the missing ones (or etcd could not be asked): its
  // result comes through the watch within the grace.
  if (auto result = wait_result(grace)) return finish_join(g, req.info, *result, out);
  Status watch_failed;
  {
    std::lock_guard<std::mutex> lock(mu);
    watch_failed = follower_error;
  }
  const std::string why = !s.ok()              ? s.message
                          : !watch_failed.ok() ? watch_failed.message
                                               : std::string();
  return make_status(
      CC_ERR_TIMEOUT,
      member_who(req.info) + ": " + where + " did not complete within " +
          std::to_string(req.timeout_ms) + " ms" +
          (why.empty() ? std::string() : " (" + why + ")") +
          "; check that every rank started and uses the same MASTER_ADDR and job id");
}

Status Backend::Impl::finish_join(uint32_t g, const MemberInfo& info, const ResultRecord& result,
                                  Joined* out) {
  if (!result.ok) return make_status(static_cast<cc_result_t>(result.code), result.words);
  if (out != nullptr) {
    out->unique_id = result.unique_id;
    out->members.clear();  // every rank reading all n would cost n^2: see progress()
    out->notice.clear();
    out->world_size = static_cast<uint32_t>(result.world_size);
  }
  std::unique_lock<std::mutex> lock(mu);
  member = true;
  leaving = false;
  comm_number = g;
  generation = 0;
  me = info;
  position = info.rank;
  ring.clear();
  world = result.world_size;
  members.clear();
  lock.unlock();
  tell_agent_member();
  return Status::success();
}

}  // namespace cc::rv::etcd
