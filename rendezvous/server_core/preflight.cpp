// The reachability test before NCCL's init, as the rendezvous server runs it
// for one generation of a job (the members' side: lib/comm/preflight.cpp).
//
// 1. Each member listens on the address NCCL will use and sends
//    PreflightReady with it. The request is parked until every member of
//    the generation has sent its own.
// 2. Then each member gets its PreflightPlan: the members it must connect
//    to. Those are the connections NCCL's bootstrap needs, with O(1) work a
//    member: its ring successor (rank + 1), and the root (rank 0) from the
//    lowest rank of each other host. Members NCCL connects inside one host
//    (NVLink, shared memory) are skipped: "one host" is NCCL's host id
//    (NCCL_HOSTID, or host name and boot id), which each member sends. When
//    no member has a target (one host), every plan says passed at once.
// 3. Each member connects, then sends PreflightReport, parked until every
//    member reported. Then one verdict for all: Ok, or Error with the same
//    message everywhere: who cannot reach whom, at which address, the connect
//    error, the likely cause and the fix.
//
// The plan, the verdict and all their messages are the rule every backend
// shares (rendezvous/rules/preflight_rules.hpp); this file keeps the parked
// requests and the phases.
//
// Deadlines: a PreflightReady parked longer than its timeout_ms (a member
// that never takes part: an older cc) skips the test for the generation,
// with a note; a PreflightReport parked longer than its timeout_ms decides
// the verdict from the reports at hand. A member running with CC_PREFLIGHT=0
// sends PreflightReady with enabled false and waits for nothing; the
// generation then skips the test. A member that fails meanwhile fails the
// test for everyone (init_failures.cpp, rule 3).
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/rules/preflight_rules.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::Preflight;
using server_core::PreflightMember;
using server_core::quote;
using server_core::rank_ranges;

namespace {

std::string where(const std::string& job, uint32_t comm_number) {
  return "communicator " + std::to_string(comm_number) + " of job " + quote(job);
}

PreflightMember& member(Preflight& pf, int32_t rank) {
  return pf.members[static_cast<size_t>(rank)];
}

}  // namespace

const ServerCore::Impl::Membership* ServerCore::Impl::membership_of(const Conn& c,
                                                                    uint32_t comm_number) const {
  for (const Membership& m : c.memberships)
    if (m.comm_number == comm_number) return &m;
  return nullptr;
}

// The generation whose reachability test a request is about, and c's
// membership of it (*ms); null once answered: c is no member of it (the
// message says what it `did`, then the `advice`), or the test already failed.
ServerCore::Impl::CommJoin* ServerCore::Impl::preflight_of(Conn& c, uint32_t rid,
                                                           uint32_t comm_number,
                                                           const std::string& did,
                                                           const std::string& advice,
                                                           const Membership** ms) {
  Job& job = *c.job;
  *ms = membership_of(c, comm_number);
  auto g = job.comm_joins.find(comm_number);
  if (*ms == nullptr || g == job.comm_joins.end()) {
    send_error(c.id, rid, CC_ERR_INVALID_USAGE,
               c.who() + " " + did + " " + where(job.id, comm_number) +
                   ", of which it is no member" + advice);
    return nullptr;
  }
  Preflight& pf = g->second.preflight;
  if (pf.phase == Preflight::Phase::failed) {
    send_error(c.id, rid, pf.code, pf.verdict);
    return nullptr;
  }
  return &g->second;
}

bool ServerCore::Impl::on_preflight_ready(Conn& c, uint32_t rid, const PreflightReady& m,
                                          Clock::time_point now) {
  Job& job = *c.job;
  const Membership* ms = nullptr;
  CommJoin* g = preflight_of(c, rid, m.comm_number, "asked for the reachability test of",
                             "; join first", &ms);
  if (g == nullptr) return true;
  CommJoin& gen = *g;
  Preflight& pf = gen.preflight;
  if (pf.decided()) {  // a late member: the answer is known
    PreflightPlan plan;
    plan.step =
        pf.phase == Preflight::Phase::passed ? PreflightStep::passed : PreflightStep::skipped;
    plan.note = pf.verdict;
    send(c.id, rid, plan);
    return true;
  }
  if (pf.members.empty()) {
    pf.members.resize(static_cast<size_t>(gen.world_size));
    pf.facts.resize(static_cast<size_t>(gen.world_size));
  }
  PreflightMember& me = member(pf, ms->rank);
  if (me.ready || pf.phase != Preflight::Phase::gathering) {
    send_error(
        c.id, rid, CC_ERR_INVALID_USAGE,
        c.who() + " sent its reachability endpoint for " + where(job.id, m.comm_number) + " twice");
    return true;
  }
  me.ready = true;
  rules::PreflightFacts& facts = pf.facts[static_cast<size_t>(ms->rank)];
  facts.info = gen.slots.at(ms->rank).info;
  facts.ready = m;
  facts.peer = server_core::peer_address(c.peer);
  ++pf.ready;
  if (!m.enabled) {
    if (pf.disabled_by < 0) pf.disabled_by = ms->rank;
    send(c.id, rid, Ok{});  // nobody waits for it
  } else {
    me.parked = park(
        c, Parked::of(Parked::Kind::preflight, rid, job, m.timeout_ms, m.comm_number, ms->rank),
        now);
  }
  if (pf.ready == gen.world_size) preflight_plan(job, m.comm_number, gen);
  return true;
}

// Every member sent its endpoint: each gets its targets (or the test is
// skipped, or there is nothing to test).
void ServerCore::Impl::preflight_plan(Job& job, uint32_t comm_number, CommJoin& gen) {
  Preflight& pf = gen.preflight;
  const int32_t n = gen.world_size;
  auto answer = [&](int32_t rank, const PreflightPlan& plan) {
    PreflightMember& me = member(pf, rank);
    auto it = parked.find(me.parked);
    me.parked = 0;
    if (it == parked.end()) return;
    send(it->second.conn, it->second.request_id, plan);
    finish_parked(it->first);
  };
  if (pf.disabled_by >= 0) {
    pf.phase = Preflight::Phase::skipped;
    pf.verdict = rules::preflight_disabled_words(gen.slots.at(pf.disabled_by).info,
                                                 where(job.id, comm_number));
    log().info("{}", printable(pf.verdict));
    PreflightPlan plan{PreflightStep::skipped, pf.verdict, {}};
    for (int32_t r = 0; r < n; ++r) answer(r, plan);
    pf.members.clear();
    pf.facts.clear();
    return;
  }
  std::vector<std::vector<ProbeTarget>> targets = rules::preflight_targets(pf.facts);
  size_t edges = 0;
  for (const std::vector<ProbeTarget>& t : targets) edges += t.size();
  if (edges == 0) {
    pf.phase = Preflight::Phase::passed;
    pf.verdict.clear();
    log().debug("{}: every rank on one host: nothing to test before NCCL's init",
                where(job.id, comm_number));
    PreflightPlan plan{PreflightStep::passed, {}, {}};
    for (int32_t r = 0; r < n; ++r) answer(r, plan);
    pf.members.clear();
    pf.facts.clear();
    return;
  }
  pf.phase = Preflight::Phase::probing;
  log().debug("{}: {} connections to test before NCCL's init", where(job.id, comm_number), edges);
  for (int32_t r = 0; r < n; ++r)
    answer(r, PreflightPlan{PreflightStep::probe, {}, std::move(targets[static_cast<size_t>(r)])});
}

bool ServerCore::Impl::on_preflight_report(Conn& c, uint32_t rid, const PreflightReport& m,
                                           Clock::time_point now) {
  Job& job = *c.job;
  const Membership* ms = nullptr;
  CommJoin* g = preflight_of(c, rid, m.comm_number, "reported a reachability test of", "", &ms);
  if (g == nullptr) return true;
  CommJoin& gen = *g;
  Preflight& pf = gen.preflight;
  if (pf.decided()) {
    send(c.id, rid, Ok{});
    return true;
  }
  const bool twice =
      pf.phase == Preflight::Phase::probing && pf.facts[static_cast<size_t>(ms->rank)].reported;
  if (pf.phase != Preflight::Phase::probing || twice) {
    send_error(c.id, rid, CC_ERR_INVALID_USAGE,
               c.who() + " reported a reachability test of " + where(job.id, m.comm_number) +
                   (twice ? " twice" : " before it got its plan"));
    return true;
  }
  PreflightMember& me = member(pf, ms->rank);
  rules::PreflightFacts& facts = pf.facts[static_cast<size_t>(ms->rank)];
  facts.reported = true;
  facts.results = m.results;
  ++pf.reported;
  me.parked = park(
      c, Parked::of(Parked::Kind::preflight, rid, job, m.timeout_ms, m.comm_number, ms->rank), now);
  if (pf.reported == gen.world_size) preflight_verdict(job, m.comm_number, gen);
  return true;
}

// Every member reported (or the deadline passed): one answer for all.
void ServerCore::Impl::preflight_verdict(Job& job, uint32_t comm_number, CommJoin& gen) {
  Preflight& pf = gen.preflight;
  const rules::PreflightVerdict verdict = rules::preflight_verdict(pf.facts);
  if (!verdict.passed) {
    preflight_fail(job, gen, CC_ERR_SYSTEM, verdict.words);
    return;
  }
  if (verdict.silent.empty())
    log().info("{}: reachability test passed ({} connections)", where(job.id, comm_number),
               verdict.tested);
  else
    log().warn("{}: reachability test passed on {} connections; rank(s) {} did not report in time",
               where(job.id, comm_number), verdict.tested, rank_ranges(verdict.silent));
  pf.phase = Preflight::Phase::passed;
  for (int32_t r = 0; r < gen.world_size; ++r) {
    PreflightMember& me = member(pf, r);
    auto it = parked.find(me.parked);
    me.parked = 0;
    if (it == parked.end()) continue;
    send(it->second.conn, it->second.request_id, Ok{});
    finish_parked(it->first);
  }
  pf.members.clear();
  pf.facts.clear();
}

// The test failed for the generation: every parked step gets the message, and
// so will every later one.
void ServerCore::Impl::preflight_fail(Job& job, CommJoin& gen, cc_result_t code,
                                      const std::string& words) {
  Preflight& pf = gen.preflight;
  pf.phase = Preflight::Phase::failed;
  pf.code = code;
  pf.verdict = words;
  log().warn("job {}: reachability test before NCCL's init failed: {}", quote(job.id),
             printable(words));
  for (PreflightMember& me : pf.members) {
    auto it = parked.find(me.parked);
    me.parked = 0;
    if (it == parked.end()) continue;
    send_error(it->second.conn, it->second.request_id, code, words);
    finish_parked(it->first);
  }
  pf.members.clear();
  pf.facts.clear();
}

void ServerCore::Impl::preflight_expired(const Parked& p) {
  Job& job = *p.job;
  const uint32_t comm_number = p.comm_number;
  const uint32_t timeout_ms = p.timeout_ms;
  auto g = job.comm_joins.find(comm_number);
  if (g == job.comm_joins.end()) return;
  CommJoin& gen = g->second;
  Preflight& pf = gen.preflight;
  if (pf.phase == Preflight::Phase::probing) {
    preflight_verdict(job, comm_number, gen);
    return;
  }
  if (pf.phase != Preflight::Phase::gathering) return;
  std::vector<int32_t> missing;
  for (int32_t r = 0; r < gen.world_size; ++r)
    if (!member(pf, r).ready) missing.push_back(r);
  pf.phase = Preflight::Phase::skipped;
  pf.verdict = rules::preflight_missing_words(missing, where(job.id, comm_number), timeout_ms);
  log().warn("{}", printable(pf.verdict));
  PreflightPlan plan{PreflightStep::skipped, pf.verdict, {}};
  for (PreflightMember& me : pf.members) {
    auto it = parked.find(me.parked);
    me.parked = 0;
    if (it == parked.end()) continue;
    send(it->second.conn, it->second.request_id, plan);
    finish_parked(it->first);
  }
  pf.members.clear();
  pf.facts.clear();
}

}  // namespace cc::rv
