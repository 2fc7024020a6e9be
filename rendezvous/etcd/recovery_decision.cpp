#include "rendezvous/etcd/recovery_decision.hpp"

#include <algorithm>

#include "common/who.hpp"
#include "rendezvous/rules/recovery_rules.hpp"
#include "rendezvous/rules/words.hpp"

namespace cc::rv::etcd {
namespace {

using rules::kMaxRegrowRanks;
const auto call_words = rules::recover_call_words;
const auto where = rules::lineage_where;

}  // namespace

bool same_process(const MemberInfo& a, const MemberInfo& b) {
  return a.host == b.host && a.pid == b.pid;
}

Held::Held(KeyValue k) : kv(std::move(k)) {
  MemberRecord m;
  if (decode(kv.value, &m)) rec = std::move(m);
}

Decision::Decision(const Snapshot& s, std::string job, Gen from)
    : s_(s), job_(std::move(job)), from_(from) {}

Decision::SeatState Decision::state(int32_t job_rank) const {
  auto it = s_.seats.find(job_rank);
  if (it == s_.seats.end()) return SeatState::dead;
  if (it->second.kv.lease != 0) return SeatState::alive;
  auto parent = s_.parents.find(job_rank);
  const auto& here = it->second.rec;
  if (parent != s_.parents.end() && parent->second.kv.lease != 0 && here && parent->second.rec &&
      same_process(here->info, parent->second.rec->info))
    return SeatState::alive;
  return SeatState::gone;
}

const std::optional<MemberRecord>& Decision::seat_record(int32_t job_rank) const {
  static const std::optional<MemberRecord> none;
  auto it = s_.seats.find(job_rank);
  return it == s_.seats.end() ? none : it->second.rec;
}

std::string Decision::seat_who(int32_t job_rank) const {
  const auto at = std::find(s_.members.begin(), s_.members.end(), job_rank);
  const int position = static_cast<int>(at - s_.members.begin());
  const auto rec = seat_record(job_rank);
  return cc::who(Who{position, rec ? rec->info.host : std::string(), rec ? rec->info.pid : 0u,
                     static_cast<int>(from_.generation)});
}

bool Decision::in_from(int32_t job_rank) const {
  return std::find(s_.members.begin(), s_.members.end(), job_rank) != s_.members.end();
}

bool Decision::survivor_ask(int32_t job_rank) const {
  auto a = s_.asks.find(job_rank);
  if (a == s_.asks.end() || a->second.replacement || !in_from(job_rank)) return false;
  if (state(job_rank) == SeatState::dead) return false;
  const auto rec = seat_record(job_rank);
  return rec && same_process(rec->info, a->second.info);
}

bool Decision::replacement_ask(int32_t job_rank) const {
  auto a = s_.asks.find(job_rank);
  return a != s_.asks.end() && a->second.replacement &&
         (!in_from(job_rank) || state(job_rank) != SeatState::alive);
}

std::vector<int32_t> Decision::survivors() const {
  std::vector<int32_t> out;
  for (const auto& [jr, a] : s_.asks)
    if (survivor_ask(jr)) out.push_back(jr);
  return out;
}

std::optional<MemberRecord> Decision::first() const {
  std::optional<MemberRecord> f;
  int64_t at = 0;
  for (int32_t jr : survivors()) {
    const int64_t rev = s_.ask_order.at(jr);
    if (!f || rev < at) {
      f = s_.asks.at(jr);
      at = rev;
    }
  }
  return f;
}

std::vector<std::string> Decision::awaited() const {
  std::vector<std::string> out;
  for (int32_t jr : s_.members)
    if (state(jr) == SeatState::alive && !survivor_ask(jr)) out.push_back(seat_who(jr));
  return out;
}

std::vector<int32_t> Decision::holes(int32_t nranks) const {
  std::vector<int32_t> out;
  for (int32_t r = 0; r < nranks; ++r)
    if (!survivor_ask(r) && !replacement_ask(r)) out.push_back(r);
  return out;
}

std::optional<std::pair<cc_result_t, std::string>> Decision::refusal() const {
  const auto f = first();
  if (!f) return std::nullopt;
  const std::string at = where(job_, from_.g, from_.generation);
  // The first call sets what the others must call, as on cc's server.
  rules::RecoveryAgreement agreement;
  (void)agreement.call(seat_who(f->info.rank), f->kind, f->nranks, at);
  auto refusal_of = [](const rules::Refusal& r) { return std::make_pair(r.code, r.words); };
  for (int32_t jr : survivors()) {
    const MemberRecord& a = s_.asks.at(jr);
    if (auto refused = agreement.call(seat_who(jr), a.kind, a.nranks, at))
      return refusal_of(*refused);
    if (a.kind == RecoverKind::regrow && (a.nranks < 1 || a.nranks > kMaxRegrowRanks))
      return std::make_pair(CC_ERR_INVALID_ARGUMENT,
                            seat_who(jr) + " called " + call_words(a.kind, a.nranks) + " on " + at +
                                "; pass the job's size (1 to " + std::to_string(kMaxRegrowRanks) +
                                " ranks)");
    if (a.kind == RecoverKind::regrow)
      if (auto refused = rules::regrow_holds(seat_who(jr), jr, a.nranks, at))
        return refusal_of(*refused);
  }
  if (f->kind == RecoverKind::regrow)
    for (int32_t r = 0; r < f->nranks; ++r)
      if (!survivor_ask(r) && replacement_ask(r) && s_.asks.at(r).info.world_size != f->nranks)
        return std::make_pair(CC_ERR_MISMATCH,
                              rules::replacement_world_words(s_.asks.at(r).info, f->nranks, at));
  return std::nullopt;
}

bool Decision::ready() const {
  const auto f = first();
  if (!f || !awaited().empty()) return false;
  return f->kind == RecoverKind::shrink || holes(f->nranks).empty();
}

ResultRecord Decision::decide(bool* need_id, RosterRecord* roster) const {
  const MemberRecord f = *first();
  ResultRecord r;
  r.ok = true;
  bool all_can_shrink = true;
  if (f.kind == RecoverKind::shrink) {
    for (int32_t jr : survivors()) {
      r.members.push_back(jr);
      all_can_shrink = all_can_shrink && s_.asks.at(jr).can_shrink;
    }
  } else {
    for (int32_t jr = 0; jr < f.nranks; ++jr) r.members.push_back(jr);
    all_can_shrink = false;
  }
  for (size_t p = 0; p < s_.members.size(); ++p)
    if (!survivor_ask(s_.members[p]) ||
        std::find(r.members.begin(), r.members.end(), s_.members[p]) == r.members.end())
      r.failed.push_back(static_cast<int32_t>(p));
  r.world_size = static_cast<int32_t>(r.members.size());
  r.method =
      static_cast<uint8_t>(all_can_shrink ? RecoverMethod::nccl_shrink : RecoverMethod::new_id);
  *need_id = !all_can_shrink;
  roster->members.clear();
  for (size_t p = 0; p < r.members.size(); ++p) {
    const MemberInfo& in = s_.asks.at(r.members[p]).info;
    roster->members.push_back({static_cast<int32_t>(p), in.host, in.pid});
  }
  return r;
}

std::string Decision::late_words(uint32_t timeout_ms) const {
  const auto f = first();
  const RecoverKind kind = f ? f->kind : RecoverKind::shrink;
  const int32_t nranks = f ? f->nranks : 0;
  std::string parts = rules::recovery_missing_words(
      awaited(), kind, kind == RecoverKind::regrow ? holes(nranks) : std::vector<int32_t>{},
      "MASTER_ADDR and job id");
  if (parts.empty()) parts = "the coordinator (the first survivor to call) was still deciding";
  return rules::recovery_late_words(kind, nranks, where(job_, from_.g, from_.generation),
                                    timeout_ms, parts);
}

}  // namespace cc::rv::etcd
