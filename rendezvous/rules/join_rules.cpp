// The join rules (see join_rules.hpp). The checks run in one order on every
// backend, so a generation with two faults fails with the same message
// wherever it joins: the world size, the rank's range, a rank claimed twice,
// the NCCL version, a GPU used twice.
#include "rendezvous/rules/join_rules.hpp"

#include <algorithm>

#include "common/who.hpp"
#include "rendezvous/rules/words.hpp"

namespace cc::rv::rules {

std::optional<Refusal> JoinCheck::arrive(const MemberInfo& in, const std::string& where,
                                         const std::vector<uint8_t>& ids) {
  const std::string me = member_who(in);
  if (!first_) first_ = in;
  const MemberInfo& f = *first_;
  if (in.world_size != f.world_size)
    return Refusal{CC_ERR_MISMATCH, "ranks disagree on the world size of " + where + ": " +
                                        member_who(f) + " said " + std::to_string(f.world_size) +
                                        ", " + me + " said " + std::to_string(in.world_size) +
                                        "; give every rank the same WORLD_SIZE"};
  if (in.rank < 0 || in.rank >= f.world_size)
    return Refusal{CC_ERR_INVALID_ARGUMENT, out_of_range_words(in, f.world_size, where)};
  if (auto taken = in_.find(in.rank); taken != in_.end())
    return Refusal{CC_ERR_MISMATCH, claimed_twice_words(taken->second, in, where)};
  if (in.nccl_version / 100 != f.nccl_version / 100) {
    // The first one's host and pid while it is in (it may have gone since).
    const MemberInfo* ref = member(f.rank);
    return Refusal{CC_ERR_MISMATCH,
                   "ranks of " + where + " load different NCCL versions: " +
                       cc::who(f.rank, ref ? ref->host : std::string(), ref ? ref->pid : 0) +
                       " has " + nccl_text(f.nccl_version) + ", " + me + " has " +
                       nccl_text(in.nccl_version) +
                       "; install the same NCCL major.minor everywhere"};
  }
  if (!in.gpu_uuid.empty()) {
    auto [owner, added] = gpu_owner_.try_emplace(gpu_owner_key(in), in.rank);
    if (!added)
      return Refusal{CC_ERR_MISMATCH,
                     member_who(in_.at(owner->second)) + " and " + me + " of " + where +
                         " use the same GPU " + in.gpu_uuid +
                         "; give each local rank its own device (LOCAL_RANK, CC_DEVICE)"};
  }
  in_.emplace(in.rank, in);
  if (!ids.empty()) ids_[in.rank] = ids;
  return std::nullopt;
}

void JoinCheck::leave(int32_t rank) {
  auto it = in_.find(rank);
  if (it == in_.end()) return;
  if (!it->second.gpu_uuid.empty()) {
    auto owner = gpu_owner_.find(gpu_owner_key(it->second));
    if (owner != gpu_owner_.end() && owner->second == rank) gpu_owner_.erase(owner);
  }
  in_.erase(it);
  ids_.erase(rank);  // its process made them: they went with it
}

void JoinCheck::clear() {
  in_.clear();
  gpu_owner_.clear();
  ids_.clear();
}

std::vector<uint8_t> JoinCheck::unique_ids() const {
  std::vector<uint8_t> out;
  for (const auto& [rank, bytes] : ids_) {
    // A contribution that does not fit is left out whole (its ids unused),
    // so every id handed out stays whole.
    if (out.size() + bytes.size() > kMaxUniqueIdBytes) continue;
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

std::vector<int32_t> JoinCheck::missing() const {
  std::vector<int32_t> out;
  for (int32_t r = 0; r < world(); ++r)
    if (!in_.count(r)) out.push_back(r);
  return out;
}

const MemberInfo* JoinCheck::member(int32_t rank) const {
  auto it = in_.find(rank);
  return it == in_.end() ? nullptr : &it->second;
}

std::string out_of_range_words(const MemberInfo& in, int32_t world, const std::string& where) {
  return member_who(in) + " is out of range for " + where + " of " + std::to_string(world) +
         " ranks (valid: 0-" + std::to_string(world - 1) + "); check RANK and WORLD_SIZE";
}

std::string claimed_twice_words(const MemberInfo& holder, const MemberInfo& in,
                                const std::string& where) {
  return "rank " + std::to_string(in.rank) + " of " + where + " was claimed twice: by " +
         member_who(holder) + " and by " + member_who(in) + "; give every process its own RANK";
}

std::vector<int32_t> absent_ranks(int32_t world, const std::vector<int32_t>& came) {
  std::vector<bool> in(static_cast<size_t>(std::max(world, 0)), false);
  for (int32_t r : came)
    if (r >= 0 && r < world) in[static_cast<size_t>(r)] = true;
  std::vector<int32_t> out;
  for (int32_t r = 0; r < world; ++r)
    if (!in[static_cast<size_t>(r)]) out.push_back(r);
  return out;
}

std::string never_joined_words(const std::vector<int32_t>& missing, int32_t world, int32_t joined,
                               const std::string& where, uint32_t timeout_ms, const Reach& reach) {
  const bool one = missing.size() == 1;
  return std::string(one ? "rank " : "ranks ") + rank_ranges(missing) + " of " +
         std::to_string(world) + " never joined " + where + " within " +
         std::to_string(timeout_ms) + " ms (" + std::to_string(joined) + " joined); check that " +
         (one ? "it" : "they") + " started, use the same " + reach.settings + ", and can reach " +
         reach.what;
}

std::string aborted_while_joining_words(const std::string& who, const std::string& where,
                                        const std::string& reason) {
  return who + " aborted while joining " + where + ": " + reason;
}

std::string already_failed_words(const std::string& where, const std::string& failure) {
  return where + " already failed: " + failure;
}

std::string late_join_words(const MemberInfo& in, const std::string& where) {
  return member_who(in) + " joined " + where + " after it had completed";
}

}  // namespace cc::rv::rules
