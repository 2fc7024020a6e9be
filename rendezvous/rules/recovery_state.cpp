// One communicator's recovery, as every backend decides it (see
// recovery_state.hpp).
#include "rendezvous/rules/recovery_state.hpp"

#include "common/who.hpp"
#include "rendezvous/rules/words.hpp"

namespace cc::rv::rules {

namespace {

bool same_process(const MemberInfo& a, const MemberInfo& b) {
  return a.host == b.host && a.pid == b.pid;
}

bool known_process(const MemberInfo& i) { return !i.host.empty() || i.pid != 0; }

}  // namespace

void Recovery::start(std::string job, uint32_t comm_number, uint32_t generation,
                     std::vector<MemberInfo> seats) {
  job_ = std::move(job);
  comm_number_ = comm_number;
  generation_ = generation;
  seats_.clear();
  replacements_.clear();
  agreement_.reset();
  awaited_ = callers_ = cannot_shrink_ = holes_ = 0;
  nccl_major_minor_ = 0;
  for (MemberInfo& info : seats) {
    if (nccl_major_minor_ == 0) nccl_major_minor_ = info.nccl_version / 100;
    Seat s;
    s.info = std::move(info);
    seats_.insert_or_assign(s.info.rank, std::move(s));
  }
  int32_t position = 0;
  for (auto& [rank, s] : seats_) s.position = position++;
  awaited_ = static_cast<int32_t>(seats_.size());
}

bool Recovery::filled(int32_t rank) const {
  auto s = seats_.find(rank);
  return (s != seats_.end() && s->second.calling) || replacements_.count(rank) != 0;
}

void Recovery::count_holes() {
  holes_ = 0;
  if (!agreement_.started() || agreement_.kind() != RecoverKind::regrow) return;
  for (int32_t r = 0; r < agreement_.nranks(); ++r) holes_ += filled(r) ? 0 : 1;
}

template <class F>
void Recovery::change(int32_t job_rank, F&& f) {
  auto it = seats_.find(job_rank);
  Seat* s = it == seats_.end() ? nullptr : &it->second;
  const bool counts_holes = agreement_.started() && agreement_.kind() == RecoverKind::regrow &&
                            job_rank >= 0 && job_rank < agreement_.nranks();
  const bool awaited_before = s && counts_awaited(*s);
  const bool calling_before = s && s->calling;
  const bool cannot_before = s && s->calling && !s->can_shrink;
  const bool filled_before = counts_holes && filled(job_rank);
  f(s);
  awaited_ += (s && counts_awaited(*s) ? 1 : 0) - (awaited_before ? 1 : 0);
  callers_ += (s && s->calling ? 1 : 0) - (calling_before ? 1 : 0);
  cannot_shrink_ += (s && s->calling && !s->can_shrink ? 1 : 0) - (cannot_before ? 1 : 0);
  if (counts_holes) holes_ += (filled_before ? 1 : 0) - (filled(job_rank) ? 1 : 0);
  if (callers_ == 0 && agreement_.started()) {  // nobody calls any more: the attempt is over
    agreement_.reset();
    holes_ = 0;
  }
}

bool Recovery::set_state(int32_t job_rank, SeatState state, const std::string& why) {
  bool dropped = false;
  change(job_rank, [&](Seat* s) {
    // A process declared failed cannot come back (its rank takes a replacement).
    if (s == nullptr || s->state == SeatState::dead) return;
    s->state = state;
    if (state == SeatState::dead) {
      if (s->why.empty()) s->why = why;
      dropped = s->calling;
      s->calling = false;
      s->can_shrink = false;
    }
  });
  return dropped;
}

void Recovery::set_process(int32_t job_rank, const MemberInfo& info) {
  auto it = seats_.find(job_rank);
  if (it == seats_.end()) return;
  it->second.info = info;
  it->second.info.rank = job_rank;
  if (nccl_major_minor_ == 0) nccl_major_minor_ = info.nccl_version / 100;
}

std::string Recovery::stale_words(const MemberInfo& caller) const {
  auto it = seats_.find(caller.rank);
  std::string why;
  if (it == seats_.end())
    why = "it is not one of its members";
  else if (known_process(it->second.info) && !same_process(it->second.info, caller))
    why = "its rank is held by " + seat_who(caller.rank);
  else if (it->second.state == SeatState::dead)
    why = "it was declared failed (" + it->second.why + ")";
  else
    return std::string();
  return stale_rank_words(caller, where(), why);
}

std::optional<Refusal> Recovery::check_caller(const MemberInfo& caller, RecoverKind kind,
                                              int32_t nranks) const {
  if (std::string stale = stale_words(caller); !stale.empty())
    return Refusal{CC_ERR_MISMATCH, stale};
  const std::string who = seat_who(caller.rank);
  // The decision walks ranks 0..nranks-1: a size no job has is refused first.
  if (kind == RecoverKind::regrow && (nranks < 1 || nranks > kMaxRegrowRanks))
    return Refusal{CC_ERR_INVALID_ARGUMENT, who + " called " + recover_call_words(kind, nranks) +
                                                " on " + where() + "; pass the job's size (1 to " +
                                                std::to_string(kMaxRegrowRanks) + " ranks)"};
  return std::nullopt;
}

std::optional<Recovery::Refused> Recovery::call(const MemberInfo& caller, RecoverKind kind,
                                                int32_t nranks, bool can_shrink) {
  if (auto refused = check_caller(caller, kind, nranks)) return Refused{*refused, false};
  const std::string who = seat_who(caller.rank);
  if (seats_.at(caller.rank).calling)
    return Refused{
        {CC_ERR_INVALID_USAGE, who + " called " + recover_call_name(kind) + " on " + where() +
                                   " while its earlier call is still in progress; "
                                   "call it once at a time"},
        false};
  const bool first = !agreement_.started();
  if (auto refused = agreement_.call(who, kind, nranks, where())) return Refused{*refused, true};
  if (kind == RecoverKind::regrow)
    if (auto refused = regrow_holds(who, caller.rank, nranks, where())) {
      if (first) agreement_.reset();
      return Refused{*refused, true};
    }
  change(caller.rank, [&](Seat* s) {
    s->calling = true;
    s->can_shrink = can_shrink;
    s->info = caller;
  });
  if (first) count_holes();
  return std::nullopt;
}

void Recovery::withdraw(int32_t job_rank) {
  change(job_rank, [](Seat* s) {
    if (s == nullptr) return;
    s->calling = false;
    s->can_shrink = false;
  });
}

std::optional<Refusal> Recovery::check_replacement(const MemberInfo& in,
                                                   const std::string& late) const {
  const int32_t r = in.rank;
  if (auto s = seats_.find(r); s != seats_.end() && s->second.state == SeatState::alive)
    return Refusal{CC_ERR_MISMATCH, alive_rank_words(late, r, where(), seat_who(r))};
  if (auto w = replacements_.find(r); w != replacements_.end())
    return Refusal{CC_ERR_MISMATCH, replacement_waiting_words(late, r, w->second.info)};
  if (nccl_major_minor_ != 0 && in.nccl_version / 100 != nccl_major_minor_)
    return Refusal{CC_ERR_MISMATCH, member_who(in) + ", a replacement for " + where() +
                                        ", has NCCL " + nccl_text(in.nccl_version) +
                                        ", but its ranks have NCCL " +
                                        std::to_string(nccl_major_minor_ / 100) + "." +
                                        std::to_string(nccl_major_minor_ % 100) +
                                        "; install the same NCCL major.minor everywhere"};
  return std::nullopt;
}

std::optional<Refusal> Recovery::replacement(const MemberInfo& in, const std::string& late,
                                             std::vector<uint8_t> id) {
  if (auto refused = check_replacement(in, late)) return refused;
  change(in.rank, [&](Seat*) { replacements_[in.rank] = Waiting{in, std::move(id)}; });
  return std::nullopt;
}

void Recovery::replacement_gone(int32_t rank) {
  if (replacements_.count(rank) == 0) return;
  change(rank, [&](Seat*) { replacements_.erase(rank); });
}

bool Recovery::ready() const {
  return callers_ > 0 && awaited_ == 0 && (kind() == RecoverKind::shrink || holes_ == 0);
}

std::vector<std::pair<MemberInfo, Refusal>> Recovery::take_wrong_replacements() {
  std::vector<std::pair<MemberInfo, Refusal>> out;
  if (!ready() || kind() != RecoverKind::regrow) return out;
  for (int32_t r = 0; r < nranks(); ++r) {
    if (taking_part(r)) continue;
    auto w = replacements_.find(r);
    if (w == replacements_.end() || w->second.info.world_size == nranks()) continue;
    out.emplace_back(
        w->second.info,
        Refusal{CC_ERR_MISMATCH, replacement_world_words(w->second.info, nranks(), where())});
    replacement_gone(r);
  }
  return out;
}

NextGeneration Recovery::decide() const {
  NextGeneration next;
  next.kind = kind();
  if (kind() == RecoverKind::shrink) {
    next.method = cannot_shrink_ == 0 ? RecoverMethod::nccl_shrink : RecoverMethod::new_id;
    for (const auto& [rank, s] : seats_)
      if (s.calling) {
        next.members.push_back(s.info);
        next.replacement.push_back(false);
      }
  } else {
    next.method = RecoverMethod::new_id;
    for (int32_t r = 0; r < nranks(); ++r) {
      const bool survivor = taking_part(r);
      next.members.push_back(survivor ? seats_.at(r).info : replacements_.at(r).info);
      next.replacement.push_back(!survivor);
    }
    if (!next.replacement.empty() && next.replacement.front())
      next.replacement_id = replacements_.at(0).id;
  }
  for (auto& m : next.members) m.comm_number = comm_number_;
  for (const auto& [rank, s] : seats_)
    if (!s.calling) next.failed.push_back(s.position);
  return next;
}

void Recovery::advance(const NextGeneration& next) {
  for (size_t i = 0; i < next.members.size(); ++i)
    if (next.replacement[i]) replacements_.erase(next.members[i].rank);
  std::map<int32_t, Waiting> waiting = std::move(replacements_);
  const int32_t nccl = nccl_major_minor_;
  start(job_, comm_number_, generation_ + 1, next.members);
  replacements_ = std::move(waiting);
  nccl_major_minor_ = nccl;
}

void Recovery::end_attempt() {
  for (auto& [rank, s] : seats_) {
    if (!s.calling) continue;
    s.calling = false;
    s.can_shrink = false;
    if (s.state == SeatState::alive) ++awaited_;
  }
  callers_ = cannot_shrink_ = holes_ = 0;
  agreement_.reset();
}

std::string Recovery::late_words(uint32_t timeout_ms, const std::string& settings,
                                 const std::string& also, const std::string& idle) const {
  std::vector<std::string> silent;
  for (const auto& [rank, s] : seats_)
    if (counts_awaited(s)) silent.push_back(seat_who(rank));
  std::vector<int32_t> holes;
  if (kind() == RecoverKind::regrow)
    for (int32_t r = 0; r < nranks(); ++r)
      if (!filled(r)) holes.push_back(r);
  std::string parts = recovery_missing_words(silent, kind(), holes, settings);
  if (!also.empty()) parts += (parts.empty() ? "" : "; ") + also;
  if (parts.empty()) parts = idle;
  return recovery_late_words(kind(), nranks(), where(), timeout_ms, parts);
}

std::string Recovery::seat_who(int32_t job_rank) const {
  auto it = seats_.find(job_rank);
  if (it == seats_.end()) return "rank " + std::to_string(job_rank);
  const MemberInfo& i = it->second.info;
  return cc::who(Who{it->second.position, i.host, i.pid, static_cast<int>(generation_)});
}

std::string Recovery::where() const { return lineage_where(job_, comm_number_, generation_); }

SeatState Recovery::state(int32_t job_rank) const {
  auto it = seats_.find(job_rank);
  return it == seats_.end() ? SeatState::dead : it->second.state;
}

bool Recovery::taking_part(int32_t job_rank) const {
  auto it = seats_.find(job_rank);
  return it != seats_.end() && it->second.calling;
}

const MemberInfo* Recovery::seat(int32_t job_rank) const {
  auto it = seats_.find(job_rank);
  return it == seats_.end() ? nullptr : &it->second.info;
}

std::vector<int32_t> Recovery::job_ranks() const {
  std::vector<int32_t> out;
  out.reserve(seats_.size());
  for (const auto& [rank, s] : seats_) out.push_back(rank);
  return out;
}

const MemberInfo* Recovery::waiting_replacement(int32_t rank) const {
  auto it = replacements_.find(rank);
  return it == replacements_.end() ? nullptr : &it->second.info;
}

}  // namespace cc::rv::rules
