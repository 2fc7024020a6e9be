// The recovery rules (see recovery_rules.hpp).
#include "rendezvous/rules/recovery_rules.hpp"

#include <algorithm>

#include "rendezvous/rules/words.hpp"

namespace cc::rv::rules {

std::optional<Refusal> RecoveryAgreement::call(const std::string& who, RecoverKind kind,
                                               int32_t nranks, const std::string& where) {
  const std::string words = who + " called " + recover_call_words(kind, nranks);
  if (!first_) {
    first_ = First{kind, kind == RecoverKind::regrow ? nranks : 0, words};
    return std::nullopt;
  }
  if (first_->kind == kind && (kind != RecoverKind::regrow || first_->nranks == nranks))
    return std::nullopt;
  return Refusal{CC_ERR_MISMATCH, "ranks disagree on how " + where + " goes on: " + first_->words +
                                      ", " + words + "; every survivor must make the same call"};
}

std::optional<Refusal> regrow_holds(const std::string& who, int32_t job_rank, int32_t nranks,
                                    const std::string& where) {
  if (job_rank < nranks) return std::nullopt;
  return Refusal{CC_ERR_INVALID_ARGUMENT,
                 who + " called " + recover_call_words(RecoverKind::regrow, nranks) + " on " +
                     where + ", but a survivor keeps its job rank " + std::to_string(job_rank) +
                     ", which a communicator of " + std::to_string(nranks) +
                     " ranks does not have; regrow to at least " + std::to_string(job_rank + 1) +
                     " ranks, or shrink"};
}

std::string replacement_world_words(const MemberInfo& replacement, int32_t nranks,
                                    const std::string& where) {
  return member_who(replacement) + " came as a replacement with a world size of " +
         std::to_string(replacement.world_size) + ", but the survivors of " + where +
         " regrow to " + std::to_string(nranks) + "; give it WORLD_SIZE=" + std::to_string(nranks);
}

std::string stale_rank_words(const MemberInfo& in, const std::string& where,
                             const std::string& why) {
  return member_who(in) + " cannot take part in the next generation of " + where + ": " + why +
         ". A process the job has given up on cannot come back: stop it; a new process started "
         "with RANK=" +
         std::to_string(in.rank) + " joins as a replacement when the survivors call cc_comm_regrow";
}

std::string alive_rank_words(const std::string& late, int32_t rank, const std::string& where,
                             const std::string& holder) {
  return late + ", and rank " + std::to_string(rank) + " is alive in " + where + ": " + holder +
         ". A replacement is taken only for a rank that failed; this process came for an older "
         "generation, or was started twice: stop it (or, if no rank failed, a rank restarted "
         "late or two communicators got one number: restart the whole job)";
}

std::string replacement_waiting_words(const std::string& late, int32_t rank,
                                      const MemberInfo& waiting) {
  return late + " as a replacement for rank " + std::to_string(rank) +
         ", but one is already waiting: " + member_who(waiting) +
         "; start one process per failed rank";
}

std::string replacement_late_words(int32_t rank, uint32_t timeout_ms, const std::string& where) {
  return "rank " + std::to_string(rank) + " waited " + std::to_string(timeout_ms) +
         " ms as a replacement in " + where +
         ", and no cc_comm_regrow took it: the survivors did not call cc_comm_regrow (or shrank "
         "instead) within that time";
}

std::string own_connection_words(RecoverKind kind, const MemberInfo& in) {
  return std::string(recover_call_name(kind)) + " by " + member_who(in) +
         ": a recovery needs a connection of its own, and this one is already a member or "
         "recovering (a client bug)";
}

std::string recovery_missing_words(const std::vector<std::string>& silent, RecoverKind kind,
                                   const std::vector<int32_t>& holes,
                                   const std::string& settings) {
  std::string parts;
  if (!silent.empty())
    parts += named_list(silent) +
             (silent.size() == 1 ? " is alive but did not call " : " are alive but did not call ") +
             recover_call_name(kind);
  if (!holes.empty())
    parts += std::string(parts.empty() ? "" : "; ") + (holes.size() == 1 ? "rank " : "ranks ") +
             rank_ranges(holes) + " never came: no replacement joined for " +
             (holes.size() == 1 ? "it" : "them") +
             "; start a process with RANK=" + std::to_string(holes.front()) +
             (holes.size() == 1 ? "" : " (and the others)") + " and the job's " + settings +
             " (cc-run --max-restarts does)";
  return parts;
}

std::string recovery_late_words(RecoverKind kind, int32_t nranks, const std::string& where,
                                uint32_t timeout_ms, const std::string& parts) {
  return recover_call_words(kind, nranks) + " on " + where + " did not complete within " +
         std::to_string(timeout_ms) + " ms: " + parts;
}

std::vector<int32_t> next_generation_members(const std::vector<int32_t>& previous, RecoverKind kind,
                                             const Joined& joined) {
  std::vector<int32_t> out;
  if (kind == RecoverKind::regrow) {
    const auto n = static_cast<int32_t>(world_size_of(joined));
    out.reserve(static_cast<size_t>(n));
    for (int32_t r = 0; r < n; ++r) out.push_back(r);
    return out;
  }
  std::vector<int32_t> left_out(joined.failed.begin(), joined.failed.end());
  std::sort(left_out.begin(), left_out.end());
  out.reserve(previous.size());
  for (size_t rank = 0; rank < previous.size(); ++rank)
    if (!std::binary_search(left_out.begin(), left_out.end(), static_cast<int32_t>(rank)))
      out.push_back(previous[rank]);
  return out;
}

}  // namespace cc::rv::rules
