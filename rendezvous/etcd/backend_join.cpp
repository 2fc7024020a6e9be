// A rank's join on etcd (see backend.hpp for the whole story): one
// transaction per rank claims its member key; rank 0 watches the member keys
// arrive, checks each as cc's server checks a join, and puts the result once
// all are there; every rank gets the result from its generation watch. The
// words are those of cc's own server.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "common/log.hpp"
#include "common/who.hpp"
#include "rendezvous/etcd/backend_impl.hpp"

namespace cc::rv::etcd {

namespace {

constexpr milliseconds kClosingGrace{1500};  // past the deadline, to name the missing ranks

struct Refusal {
  cc_result_t code = CC_SUCCESS;
  std::string words;
};

std::string where_of(const std::string& job, uint32_t g) {
  return "job " + quote(job) + " (generation " + std::to_string(g) + ")";
}

std::string out_of_range(const MemberInfo& in, int32_t world, const std::string& where) {
  return member_who(in) + " is out of range for " + where + " of " + std::to_string(world) +
         " ranks (valid: 0-" + std::to_string(world - 1) + "); check RANK and WORLD_SIZE";
}

// The members of a joining generation as rank 0 sees them arrive, each
// checked as cc's server checks a join: against the world size and NCCL
// version of the first to arrive, and no GPU of a host twice.
class Arrivals {
 public:
  explicit Arrivals(std::string where) : where_(std::move(where)) {}

  std::optional<Refusal> arrive(const MemberRecord& m) {
    const MemberInfo& in = m.info;
    const std::string me = member_who(in);
    if (!first_) first_ = in;
    const MemberInfo& f = *first_;
    if (in.world_size != f.world_size)
      return Refusal{CC_ERR_MISMATCH, "ranks disagree on the world size of " + where_ + ": " +
                                          member_who(f) + " said " + std::to_string(f.world_size) +
                                          ", " + me + " said " + std::to_string(in.world_size) +
                                          "; give every rank the same WORLD_SIZE"};
    if (in.rank < 0 || in.rank >= f.world_size)
      return Refusal{CC_ERR_INVALID_ARGUMENT, out_of_range(in, f.world_size, where_)};
    if (in.nccl_version / 100 != f.nccl_version / 100) {
      auto ref =
          present_.find(f.rank);  // as cc's server: the first one's host and pid while it is there
      const std::string host = ref != present_.end() ? ref->second.info.host : std::string();
      const uint32_t pid = ref != present_.end() ? ref->second.info.pid : 0;
      return Refusal{
          CC_ERR_MISMATCH,
          "ranks of " + where_ + " load different NCCL versions: " + cc::who(f.rank, host, pid) +
              " has " + nccl_text(f.nccl_version) + ", " + me + " has " +
              nccl_text(in.nccl_version) + "; install the same NCCL major.minor everywhere"};
    }
    if (!in.gpu_uuid.empty()) {
      auto [owner, added] = gpu_owner_.try_emplace(gpu_owner_key(in), in.rank);
      if (!added && owner->second != in.rank)
        return Refusal{CC_ERR_MISMATCH,
                       member_who(present_.at(owner->second).info) + " and " + me + " of " +
                           where_ + " use the same GPU " + in.gpu_uuid +
                           "; give each local rank its own device (LOCAL_RANK, CC_DEVICE)"};
    }
    present_[in.rank] = m;
    return std::nullopt;
  }

  // A member key went while the generation joined (its lease expired).
  void leave(int32_t rank) {
    auto it = present_.find(rank);
    if (it == present_.end()) return;
    if (!it->second.info.gpu_uuid.empty())
      gpu_owner_.erase(gpu_owner_key(it->second.info));
    present_.erase(it);
  }

  int32_t world() const { return first_ ? first_->world_size : 0; }
  bool complete() const {
    return first_ && static_cast<int32_t>(present_.size()) == first_->world_size;
  }
  int32_t joined() const { return static_cast<int32_t>(present_.size()); }
  std::vector<int32_t> missing() const {
    std::vector<int32_t> out;
    for (int32_t r = 0; r < world(); ++r)
      if (!present_.count(r)) out.push_back(r);
    return out;
  }
  const std::map<int32_t, MemberRecord>& present() const { return present_; }

 private:
  std::string where_;
  std::optional<MemberInfo> first_;
  std::map<int32_t, MemberRecord> present_;
  std::unordered_map<std::string, int32_t> gpu_owner_;  // gpu_owner_key -> rank
};

std::string never_joined(const std::vector<int32_t>& missing, int32_t world, int32_t joined,
                         const std::string& where, uint32_t timeout_ms,
                         const std::string& endpoints) {
  return std::string(missing.size() == 1 ? "rank " : "ranks ") + rank_ranges(missing) + " of " +
         std::to_string(world) + " never joined " + where + " within " +
         std::to_string(timeout_ms) + " ms (" + std::to_string(joined) + " joined); check that " +
         (missing.size() == 1 ? "it" : "they") +
         " started, use the same MASTER_ADDR (the etcd endpoints " + endpoints +
         ") and job id, and can reach etcd";
}

}  // namespace

Status Backend::join(const Join& request, Joined* out) { return impl_->join(request, out); }

Status Backend::Impl::join(const Join& req, Joined* out) {
  const Deadline deadline = within(req.timeout_ms);
  const MemberInfo& in = req.info;
  const uint32_t g = in.generation;
  const std::string where = where_of(opt.job_id, g);
  const std::string me = member_who(in);
  uint32_t busy_with = 0;
  Joining joining_now(*this, in, &busy_with);
  if (!joining_now.started())
    return make_status(CC_ERR_INVALID_USAGE,
                       me + ": this etcd rendezvous connection already joined generation " +
                           std::to_string(busy_with) + " of job " + quote(opt.job_id) +
                           "; use one connection per communicator");

  const Deadline requests = std::min(deadline, after(opt.request_timeout));
  if (Status s = ensure_lease(requests); !s.ok()) return s;
  int64_t my_lease = 0, since = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    my_lease = lease;
    since = lease_revision;
  }
  // The generation's watch opens while the claim below is sent.
  start_watcher(Watched{Gen(g), in.rank, in.world_size, {}}, since + 1);
  struct StopUnlessJoined {
    Impl& i;
    ~StopUnlessJoined() {
      bool joined = false;
      {
        std::lock_guard<std::mutex> lock(i.mu);
        joined = i.member;
      }
      if (!joined) i.stop_watcher();
    }
  } stop_unless_joined{*this};

  // One transaction: claim the rank, unless it is taken or the generation
  // has ended. Rank 0 also reads who came before it.
  const std::string nonce = next_op_id();
  const MemberRecord rec{in, nonce, in.rank == 0 ? req.unique_id : std::vector<uint8_t>{}};
  TxnResult r;
  for (;;) {
    my_lease = current_lease();
    Txn t;
    t.compare = {Compare::absent(keys.member(g, in.rank)), Compare::absent(keys.result(g))};
    t.success = {Op::put(keys.member(g, in.rank), encode(rec), my_lease)};
    if (in.rank == 0) t.success.push_back(Op::get_prefix(keys.member_prefix(g)));
    t.failure = {Op::get(keys.member(g, in.rank)), Op::get(keys.result(g))};
    Status s = etcd->txn(t, requests, &r);
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
      if (decode(done.front().value, &res) && res.ok) return join_as_replacement(req, out);
      return make_status(CC_ERR_MISMATCH,
                         where + " already failed: " + (res.ok ? std::string() : res.words));
    }
    if (!ours)
      return fail_generation(g, CC_ERR_MISMATCH,
                             "rank " + std::to_string(in.rank) + " of " + where +
                                 " was claimed twice: by " + member_who(holder.info) + " and by " +
                                 me + "; give every process its own RANK",
                             requests);
  }
  if (in.rank < 0 || in.rank >= in.world_size)
    return fail_generation(g, CC_ERR_INVALID_ARGUMENT, out_of_range(in, in.world_size, where),
                           requests);

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
      const std::vector<int32_t> missing = arrivals.missing();
      return fail_generation(g, CC_ERR_TIMEOUT,
                             never_joined(missing, arrivals.world(), arrivals.joined(), where,
                                          req.timeout_ms, etcd->address().endpoint_list()),
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
  done.unique_id = arrivals.present().at(0).unique_id;
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
      std::vector<bool> came(static_cast<size_t>(std::max(world, 0)), false);
      for (const KeyValue& kv : present.kvs)
        if (auto rank = keys.member_rank(g, kv.key); rank && *rank >= 0 && *rank < world)
          came[static_cast<size_t>(*rank)] = true;
      std::vector<int32_t> missing;
      for (int32_t rank = 0; rank < world; ++rank)
        if (!came[static_cast<size_t>(rank)]) missing.push_back(rank);
      return fail_generation(
          g, CC_ERR_TIMEOUT,
          never_joined(missing, world, world - static_cast<int32_t>(missing.size()), where,
                       req.timeout_ms, etcd->address().endpoint_list()),
          grace);
    }
  }
  // Another rank names the missing ones (or etcd could not be asked): its
  // result comes through the watch within the grace.
  if (auto result = wait_result(grace)) return finish_join(g, req.info, *result, out);
  Status watch_failed;
  {
    std::lock_guard<std::mutex> lock(mu);
    watch_failed = watch_error;
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
  }
  std::lock_guard<std::mutex> lock(mu);
  member = true;
  leaving = false;
  gen = g;
  epoch = 0;
  me = info;
  position = info.rank;
  ring.clear();
  world = result.world_size;
  members.clear();
  return Status::success();
}

}  // namespace cc::rv::etcd
