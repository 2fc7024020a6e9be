#include "rendezvous/etcd/recovery_decision.hpp"

#include <algorithm>

#include "rendezvous/rules/join_rules.hpp"
#include "rendezvous/rules/words.hpp"

namespace cc::rv::etcd {

namespace {

// Why etcd declares a member failed.
constexpr const char* kLeaseExpired = "its etcd lease expired";

}  // namespace

bool same_process(const MemberInfo& a, const MemberInfo& b) {
  return a.host == b.host && a.pid == b.pid;
}

Held::Held(KeyValue k) : kv(std::move(k)) {
  MemberRecord m;
  if (decode(kv.value, &m)) rec = std::move(m);
}

rules::SeatState seat_state(const Snapshot& s, int32_t job_rank) {
  auto it = s.seats.find(job_rank);
  if (it == s.seats.end()) return rules::SeatState::dead;
  if (it->second.kv.lease != 0) return rules::SeatState::alive;
  auto parent = s.parents.find(job_rank);
  const auto& here = it->second.rec;
  if (parent != s.parents.end() && parent->second.kv.lease != 0 && here && parent->second.rec &&
      same_process(here->info, parent->second.rec->info))
    return rules::SeatState::alive;
  return rules::SeatState::gone;
}

void Tracker::load(const Snapshot& s) {
  refusal_.reset();
  std::vector<MemberInfo> members;
  members.reserve(s.members.size());
  for (int32_t jr : s.members) {
    MemberInfo info;  // a member whose key went: its process is no longer known
    if (auto it = s.seats.find(jr); it != s.seats.end() && it->second.rec)
      info = it->second.rec->info;
    info.rank = jr;
    members.push_back(std::move(info));
  }
  rules_.start(job_, from_.g, from_.generation, std::move(members));
  for (int32_t jr : s.members)
    if (const rules::SeatState st = seat_state(s, jr); st != rules::SeatState::alive)
      rules_.set_state(jr, st, kLeaseExpired);
  std::vector<std::pair<int64_t, int32_t>> order;  // the requests as they came
  order.reserve(s.ask_order.size());
  for (const auto& [jr, revision] : s.ask_order) order.emplace_back(revision, jr);
  std::sort(order.begin(), order.end());
  for (const auto& [revision, jr] : order) offer(s, jr);
}

void Tracker::offer(const Snapshot& s, int32_t jr) {
  auto a = s.asks.find(jr);
  if (a == s.asks.end()) return;
  const MemberRecord& m = a->second;
  if (m.replacement) {
    if (rules_.waiting_replacement(jr) != nullptr) return;
    // Refused (its rank is alive, ...): it sees so itself; a seat that dies
    // later offers it again.
    (void)rules_.replacement(
        m.info, rules::late_join_words(m.info, rules::communicator_where(job_, from_.g)));
    return;
  }
  if (rules_.taking_part(jr)) return;
  // A caller-only refusal (stale) is no survivor's request: not counted.
  auto refused = rules_.call(m.info, m.kind, m.nranks, m.can_shrink);
  if (refused && refused->ends_attempt && !refusal_) refusal_ = refused->refusal;
}

void Tracker::seat_changed(const Snapshot& s, int32_t jr) {
  if (!rules_.has_seat(jr) || rules_.state(jr) == rules::SeatState::dead) return;
  if (auto it = s.seats.find(jr); it != s.seats.end() && it->second.rec && !rules_.taking_part(jr))
    rules_.set_process(jr, it->second.rec->info);
  rules_.set_state(jr, seat_state(s, jr), kLeaseExpired);
  offer(s, jr);
}

void Tracker::on_event(const Keys& keys, const Snapshot& s, const WatchEvent& e) {
  const Gen next{from_.g, from_.generation + 1};
  if (auto jr = keys.member_rank(from_, e.kv.key)) {
    seat_changed(s, *jr);
    return;
  }
  if (from_.generation > 0)
    if (auto jr = keys.member_rank(Gen{from_.g, from_.generation - 1}, e.kv.key)) {
      seat_changed(s, *jr);
      return;
    }
  if (auto jr = keys.member_rank(next, e.kv.key)) {
    if (e.type == WatchEvent::Type::del || s.asks.count(*jr) == 0) {
      rules_.withdraw(*jr);
      rules_.replacement_gone(*jr);
      return;
    }
    offer(s, *jr);
  }
}

ResultRecord Tracker::decide(bool* need_id, RosterRecord* roster) const {
  const rules::NextGeneration next = rules_.decide();
  ResultRecord r;
  r.ok = true;
  roster->members.clear();
  for (size_t p = 0; p < next.members.size(); ++p) {
    const MemberInfo& in = next.members[p];
    r.members.push_back(in.rank);
    roster->members.push_back({static_cast<int32_t>(p), in.host, in.pid});
  }
  r.failed = next.failed;
  r.world_size = static_cast<int32_t>(next.members.size());
  r.method = static_cast<uint8_t>(next.method);
  *need_id = next.method == RecoverMethod::new_id;
  return r;
}

std::string Tracker::late_words(uint32_t timeout_ms) const {
  return rules_.late_words(timeout_ms, "MASTER_ADDR and job id", "",
                           "the coordinator (the first survivor to call) was still deciding");
}

}  // namespace cc::rv::etcd
