// The reachability test before NCCL's init on etcd, decided by the rule cc's
// server follows (rendezvous/rules/preflight_rules.hpp), so every member
// gets the same plan and the same verdict in the same words on both
// backends. Keys under the generation (keys.hpp), values in
// preflight_records.hpp:
//
// 1. Each member puts its endpoint on preflight/ready/<rank>, on its lease.
//    A member with CC_PREFLIGHT=0 also puts the skipped verdict itself (a
//    transaction on the verdict's absence) and waits for nothing.
// 2. The generation's rank 0 watches preflight/ready/ until every member's
//    endpoint came, computes every member's targets by the rule and puts
//    them on preflight/plan/<rank> (up to kPlansPerTxn to a transaction);
//    with no target anywhere (one host) it puts the passed verdict instead.
//    Its deadline passed first (a member without the test): it puts the
//    skipped verdict naming the ranks that never came.
// 3. Each member connects to its targets and puts preflight/report/<rank>,
//    on its lease. Rank 0 watches preflight/report/ until every member
//    reported or its deadline passed, and puts the one verdict, once.
//
// Every member watches its plan key, the verdict key and the generation's
// events key from the join's checked revision, so it misses nothing put
// before it looked. A departure on the events key (an abort, a failed init,
// a member gone without leaving or whose lease expired) while the test is
// undecided fails it, in the rule's words for that member: the first member
// to see it puts that verdict (cc's server: init_failures.cpp, rule 3).
// Every wait ends at its deadline: a member other than rank 0 waits
// kVerdictGrace longer than rank 0, which decides at its own.
//
// Cost per member: 2 puts and 2 watches; rank 0 also watches the two
// prefixes (O(n) events, once each) and puts n plans in n / kPlansPerTxn
// transactions, and the verdict.
#include <algorithm>
#include <functional>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/etcd/backend_impl.hpp"
#include "rendezvous/etcd/preflight_records.hpp"
#include "rendezvous/rules/preflight_rules.hpp"

namespace cc::rv::etcd {
namespace {

constexpr milliseconds kVerdictGrace{5000};
constexpr size_t kPlansPerTxn = 64;  // etcd's default limit is 128 operations

using Verdict = PreflightVerdictRecord;

// The puts under `prefix` (each member's ready or report key).
WatchSpec puts_under(const std::string& prefix) {
  WatchSpec w;
  w.key = prefix;
  w.range_end = prefix_end(prefix);
  w.no_delete = true;
  return w;
}

}  // namespace

struct Backend::Impl::Preflighting {
  Gen at{0};
  int32_t position = 0;
  int32_t world = 0;
  int64_t lease = 0;
  int64_t from = 0;  // the revision the watches start at
  std::string where;
};

// The generation this rank is a member of, when it is that of comm_number.
Status Backend::Impl::preflighting(uint32_t comm_number, const std::string& did,
                                   Preflighting* out) {
  std::lock_guard<std::mutex> lock(mu);
  if (!member || comm_number != this->comm_number)
    return make_status(CC_ERR_INVALID_USAGE,
                       member_who(me) + " " + did + " " +
                           rules::communicator_where(opt.job_id, comm_number) +
                           ", of which it is no member on etcd; join first");
  out->at = current();
  out->position = position;
  out->world = world;
  out->lease = lease;
  out->from = join_result ? join_result->checked_revision + 1 : 0;
  out->where = rules::communicator_where(opt.job_id, comm_number);
  return Status::success();
}

// Puts the verdict unless one is there; *decided: the one in etcd.
Status Backend::Impl::put_preflight_verdict(const Preflighting& p, const Verdict& v,
                                            Verdict* decided, Deadline deadline) {
  const std::string key = keys.preflight_verdict(p.at);
  Txn t;
  t.compare = {Compare::absent(key)};
  t.success = {Op::put(key, encode(v))};
  t.failure = {Op::get(key)};
  TxnResult r;
  if (Status s = etcd->txn(t, deadline, &r); !s.ok()) return s;
  if (r.succeeded) {
    *decided = v;
    if (v.outcome == Verdict::Outcome::failed)
      log().warn("etcd: job {}: reachability test before NCCL's init failed: {}", quote(opt.job_id),
                 printable(v.words));
    return Status::success();
  }
  if (!r.responses.empty() && !r.responses[0].range.kvs.empty() &&
      decode(r.responses[0].range.kvs[0].value, decided))
    return Status::success();
  return make_status(CC_ERR_RENDEZVOUS,
                     "the reachability test's verdict of " + p.where + " in etcd cannot be read");
}

// Watches the verdict and the events key, and `extra` (on_extra says when it
// has what it waits for), until one of them ends the wait or the deadline
// (CC_ERR_TIMEOUT). A departure puts the failed verdict, which ends it.
Status Backend::Impl::watch_preflight(const Preflighting& p, std::vector<WatchSpec> extra,
                                      Deadline deadline,
                                      const std::function<bool(const WatchEvent&)>& on_extra,
                                      std::optional<Verdict>* verdict) {
  const size_t n_extra = extra.size();
  std::vector<WatchSpec> specs = std::move(extra);
  WatchSpec v;
  v.key = keys.preflight_verdict(p.at);
  v.no_delete = true;
  specs.push_back(v);
  WatchSpec ev;
  ev.key = keys.events(p.at);
  ev.no_delete = true;
  specs.push_back(ev);
  for (WatchSpec& s : specs) s.start_revision = p.from;
  Status failed_put = Status::success();
  Status s =
      etcd->watch(specs, deadline, nullptr, [&](const std::vector<WatchEvent>& evs, int64_t) {
        for (const WatchEvent& e : evs) {
          if (e.spec < n_extra) {
            if (on_extra(e)) return false;
            continue;
          }
          if (e.spec == n_extra) {
            Verdict d;
            if (!decode(e.kv.value, &d)) continue;
            *verdict = d;
            return false;
          }
          Departure d;
          if (!decode(e.kv.value, &d) || d.rank == p.position) continue;
          Verdict failed{Verdict::Outcome::failed, static_cast<uint32_t>(CC_ERR_PEER_FAILED),
                         rules::preflight_member_failed_words(
                             d.kind, cc::who(d.rank, d.host, d.pid), d.reason)};
          Verdict decided;
          failed_put = put_preflight_verdict(p, failed, &decided, deadline);
          if (!failed_put.ok()) return false;
          *verdict = decided;
          return false;
        }
        return true;
      });
  if (!failed_put.ok()) return failed_put;
  return s;
}

namespace {

Status plan_of(const Verdict& v, PreflightPlan* out) {
  switch (v.outcome) {
    case Verdict::Outcome::passed:
      *out = PreflightPlan{PreflightStep::passed, {}, {}};
      return Status::success();
    case Verdict::Outcome::skipped:
      *out = PreflightPlan{PreflightStep::skipped, v.words, {}};
      return Status::success();
    case Verdict::Outcome::failed:
      break;
  }
  return make_status(static_cast<cc_result_t>(v.code), v.words);
}

Status answer_of(const Verdict& v) {
  if (v.outcome != Verdict::Outcome::failed) return Status::success();
  return make_status(static_cast<cc_result_t>(v.code), v.words);
}

Deadline deadline_of(uint32_t timeout_ms, milliseconds otherwise) {
  return Clock::now() + (timeout_ms == 0 ? otherwise : milliseconds(timeout_ms));
}

}  // namespace

Status Backend::Impl::preflight_ready(const PreflightReady& request, PreflightPlan* out) {
  Preflighting p;
  if (Status s = preflighting(request.comm_number, "asked for the reachability test of", &p);
      !s.ok())
    return s;
  const Deadline put_deadline = after(opt.request_timeout);
  PreflightReadyRecord rec;
  {
    std::lock_guard<std::mutex> lock(mu);
    rec = PreflightReadyRecord{p.position, me.host, me.pid, request};
  }
  if (Status s =
          etcd->put(keys.preflight_ready(p.at, p.position), encode(rec), p.lease, put_deadline);
      !s.ok())
    return s;
  if (!request.enabled) {  // it waits for nobody, and skips the test for all
    MemberInfo off;
    off.rank = p.position;
    off.host = rec.host;
    off.pid = rec.pid;
    Verdict decided;
    if (Status s = put_preflight_verdict(
            p, Verdict{Verdict::Outcome::skipped, 0, rules::preflight_disabled_words(off, p.where)},
            &decided, put_deadline);
        !s.ok())
      return s;
    *out = PreflightPlan{PreflightStep::skipped, "CC_PREFLIGHT=0", {}};  // as cc's server's client
    return Status::success();
  }
  std::optional<Verdict> verdict;
  if (p.position != 0) {  // rank 0 plans
    std::optional<PreflightPlanRecord> plan;
    WatchSpec mine;
    mine.key = keys.preflight_plan(p.at, p.position);
    mine.no_delete = true;
    Status s = watch_preflight(
        p, {mine}, deadline_of(request.timeout_ms, opt.request_timeout) + kVerdictGrace,
        [&](const WatchEvent& e) {
          PreflightPlanRecord r;
          if (!decode(e.kv.value, &r)) return false;
          plan = std::move(r);
          return true;
        },
        &verdict);
    if (verdict) return plan_of(*verdict, out);
    if (plan) {
      *out = PreflightPlan{PreflightStep::probe, {}, std::move(plan->targets)};
      return Status::success();
    }
    if (s.code != CC_ERR_TIMEOUT) return s;
    *out = PreflightPlan{PreflightStep::skipped,
                         "rank 0 of " + p.where + " planned no reachability test within " +
                             std::to_string(request.timeout_ms + kVerdictGrace.count()) +
                             " ms, so NCCL's init starts untested",
                         {}};
    return Status::success();
  }
  // Rank 0: every member's endpoint, then every member's plan.
  std::vector<rules::PreflightFacts> facts(static_cast<size_t>(p.world));
  int32_t ready = 0;
  const WatchSpec readies = puts_under(keys.preflight_ready_prefix(p.at));
  Status s = watch_preflight(
      p, {readies}, deadline_of(request.timeout_ms, opt.request_timeout),
      [&](const WatchEvent& e) {
        PreflightReadyRecord r;
        const auto rank = Keys::rank_under(readies.key, e.kv.key);
        if (!rank || *rank >= p.world || !decode(e.kv.value, &r)) return false;
        rules::PreflightFacts& f = facts[static_cast<size_t>(*rank)];
        if (f.info.rank < 0) ++ready;
        f.info.rank = *rank;
        f.info.host = r.host;
        f.info.pid = r.pid;
        f.ready = r.ready;
        return ready == p.world;
      },
      &verdict);
  if (verdict) return plan_of(*verdict, out);
  Verdict decided;
  if (s.code == CC_ERR_TIMEOUT) {  // a member without the test (an older cc): skipped
    std::vector<int32_t> missing;
    for (int32_t r = 0; r < p.world; ++r)
      if (facts[static_cast<size_t>(r)].info.rank < 0) missing.push_back(r);
    const std::string words = rules::preflight_missing_words(missing, p.where, request.timeout_ms);
    log().warn("etcd: {}", printable(words));
    if (Status w = put_preflight_verdict(p, Verdict{Verdict::Outcome::skipped, 0, words}, &decided,
                                         put_deadline);
        !w.ok())
      return w;
    return plan_of(decided, out);
  }
  if (!s.ok()) return s;
  for (const rules::PreflightFacts& f : facts) {
    if (f.ready.enabled) continue;  // its own verdict may not have come yet
    if (Status w = put_preflight_verdict(
            p,
            Verdict{Verdict::Outcome::skipped, 0, rules::preflight_disabled_words(f.info, p.where)},
            &decided, put_deadline);
        !w.ok())
      return w;
    return plan_of(decided, out);
  }
  std::vector<std::vector<ProbeTarget>> targets = rules::preflight_targets(facts);
  size_t edges = 0;
  for (const std::vector<ProbeTarget>& t : targets) edges += t.size();
  if (edges == 0) {  // one host: nothing to test
    if (Status w = put_preflight_verdict(p, Verdict{Verdict::Outcome::passed, 0, {}}, &decided,
                                         put_deadline);
        !w.ok())
      return w;
    return plan_of(decided, out);
  }
  for (int32_t first = 1; first < p.world; first += static_cast<int32_t>(kPlansPerTxn)) {
    Txn t;
    const int32_t end = std::min(p.world, first + static_cast<int32_t>(kPlansPerTxn));
    for (int32_t r = first; r < end; ++r)
      t.success.push_back(Op::put(keys.preflight_plan(p.at, r),
                                  encode(PreflightPlanRecord{targets[static_cast<size_t>(r)]})));
    TxnResult res;
    if (Status w = etcd->txn(t, put_deadline, &res); !w.ok()) return w;
  }
  log().debug("etcd: {}: {} connections to test before NCCL's init", p.where, edges);
  {
    std::lock_guard<std::mutex> lock(mu);
    preflight_facts = std::move(facts);
  }
  *out = PreflightPlan{PreflightStep::probe, {}, std::move(targets[0])};
  return Status::success();
}

Status Backend::Impl::preflight_report(const PreflightReport& request) {
  Preflighting p;
  if (Status s = preflighting(request.comm_number, "reported a reachability test of", &p); !s.ok())
    return s;
  const Deadline put_deadline = after(opt.request_timeout);
  if (Status s = etcd->put(keys.preflight_report(p.at, p.position),
                           encode(PreflightReportRecord{request.results}), p.lease, put_deadline);
      !s.ok())
    return s;
  std::optional<Verdict> verdict;
  const Deadline deadline = deadline_of(request.timeout_ms, opt.request_timeout);
  if (p.position != 0) {  // rank 0 decides
    Status s = watch_preflight(
        p, {}, deadline + kVerdictGrace, [](const WatchEvent&) { return false; }, &verdict);
    if (verdict) return answer_of(*verdict);
    if (s.code != CC_ERR_TIMEOUT) return s;
    log().warn(
        "etcd: {}: no verdict of the reachability test from rank 0 within {} ms; NCCL's "
        "init starts",
        p.where, request.timeout_ms + kVerdictGrace.count());
    return Status::success();
  }
  std::vector<rules::PreflightFacts> facts;
  {
    std::lock_guard<std::mutex> lock(mu);
    facts = std::move(preflight_facts);
    preflight_facts.clear();
  }
  if (facts.size() != static_cast<size_t>(p.world)) {
    std::lock_guard<std::mutex> lock(mu);
    return make_status(CC_ERR_INVALID_USAGE, member_who(me) + " reported a reachability test of " +
                                                 p.where + " before it got its plan");
  }
  int32_t reported = 0;
  const WatchSpec reports = puts_under(keys.preflight_report_prefix(p.at));
  Status s = watch_preflight(
      p, {reports}, deadline,
      [&](const WatchEvent& e) {
        PreflightReportRecord r;
        const auto rank = Keys::rank_under(reports.key, e.kv.key);
        if (!rank || *rank >= p.world || !decode(e.kv.value, &r)) return false;
        rules::PreflightFacts& f = facts[static_cast<size_t>(*rank)];
        if (!f.reported) ++reported;
        f.reported = true;
        f.results = std::move(r.results);
        return reported == p.world;
      },
      &verdict);
  if (verdict) return answer_of(*verdict);
  if (!s.ok() && s.code != CC_ERR_TIMEOUT) return s;
  const rules::PreflightVerdict v = rules::preflight_verdict(facts);  // from the reports at hand
  if (v.passed && v.silent.empty())
    log().info("etcd: {}: reachability test passed ({} connections)", p.where, v.tested);
  else if (v.passed)
    log().warn(
        "etcd: {}: reachability test passed on {} connections; rank(s) {} did not report "
        "in time",
        p.where, v.tested, rank_ranges(v.silent));
  Verdict decided;
  if (Status w = put_preflight_verdict(
          p,
          v.passed
              ? Verdict{Verdict::Outcome::passed, 0, {}}
              : Verdict{Verdict::Outcome::failed, static_cast<uint32_t>(CC_ERR_SYSTEM), v.words},
          &decided, put_deadline);
      !w.ok())
    return w;
  return answer_of(decided);
}

// ---- Backend -----------------------------------------------------------------

Status Backend::preflight_ready(const PreflightReady& request, PreflightPlan* out) {
  return impl_->preflight_ready(request, out);
}

Status Backend::preflight_report(const PreflightReport& request) {
  return impl_->preflight_report(request);
}

}  // namespace cc::rv::etcd
